-- Drives `evoteam serve` from Neovim's built-in LSP client, headless, and writes what it saw to a JSON file.
--
-- Environment: EVOTEAM_NVIM_CMD (the server command, a JSON list), EVOTEAM_NVIM_ROOT (the repository),
-- EVOTEAM_NVIM_FILE (the kernel file to open), EVOTEAM_NVIM_ENTRY (its entry point's name), EVOTEAM_NVIM_OUT
-- (the JSON file to write). It asks only for what the server offers: evoteam/status always; hover, code lenses,
-- inlay hints and code actions when the server advertises them; `evoteam.runs` when it lists the command; and it
-- waits for textDocument/publishDiagnostics when the status lists a "diagnostics" feature. Works with Neovim 0.7
-- (vim.lsp.start_client) and later (vim.lsp.start). Always writes the file and quits, an error included.

local TIMEOUT = 60000
local METHODS = vim.fn.has("nvim-0.11") == 1 -- client:request(...) from 0.11 on, client.request(...) before
local initialized = false
local out = { requests = {}, diagnostics = {}, notifications = {}, messages = {} }

local function env(name)
  local value = assert(os.getenv(name), name .. " is not set")
  return value
end

local function write_out()
  local file = assert(io.open(env("EVOTEAM_NVIM_OUT"), "w"))
  file:write(vim.json.encode(out))
  file:close()
end

local function wait(what, predicate)
  if not vim.wait(TIMEOUT, predicate, 20) then
    error("timed out waiting for " .. what)
  end
end

-- One request through the client; its answer (or error) lands in out.requests[key].
local function request(client, bufnr, key, method, params)
  local done = false
  local function handler(err, result)
    out.requests[key] = { method = method, error = err, result = result == nil and vim.NIL or result }
    done = true
  end
  if METHODS then
    client:request(method, params, handler, bufnr)
  else
    client.request(method, params, handler, bufnr)
  end
  wait(method, function()
    return done
  end)
end

local function entry_position(bufnr, entry)
  for line, text in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    local column = text:find(entry .. "%s*%(")
    if column then
      return { line = line - 1, character = column - 1 }
    end
  end
  return { line = 0, character = 0 }
end

local function main()
  local root, file = env("EVOTEAM_NVIM_ROOT"), env("EVOTEAM_NVIM_FILE")
  local handlers = {
    ["textDocument/publishDiagnostics"] = function(_, result)
      table.insert(out.diagnostics, result)
    end,
    ["evoteam/runUpdated"] = function(_, result)
      table.insert(out.notifications, { method = "evoteam/runUpdated", params = result })
    end,
    ["window/showMessage"] = function(_, result)
      table.insert(out.messages, result)
    end,
  }
  local config = {
    name = "evoteam",
    cmd = vim.json.decode(env("EVOTEAM_NVIM_CMD")),
    cmd_cwd = root,
    root_dir = root,
    handlers = handlers,
    settings = { evoteam = { budget = 123456 } },
    -- as nvim-lspconfig does: Neovim 0.7 neither advertises workspace/configuration nor sends the settings
    on_init = function(client)
      local params = { settings = client.config.settings }
      if METHODS then
        client:notify("workspace/didChangeConfiguration", params)
      else
        client.notify("workspace/didChangeConfiguration", params)
      end
      initialized = true
    end,
    on_exit = function(code, signal)
      out.exit = { code = code, signal = signal }
    end,
  }

  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local client_id
  if vim.lsp.start then
    client_id = vim.lsp.start(config)
  else
    client_id = assert(vim.lsp.start_client(config), "the client did not start")
    vim.lsp.buf_attach_client(bufnr, client_id)
  end
  local client = vim.lsp.get_client_by_id(client_id)
  wait("initialize", function()
    return initialized
  end)
  out.attached = vim.lsp.buf_is_attached(bufnr, client_id)
  out.capabilities = client.server_capabilities

  request(client, bufnr, "status", "evoteam/status", vim.empty_dict())
  local status = out.requests.status.result or {}
  local features = status.features or {}
  local caps = client.server_capabilities
  local uri = vim.uri_from_bufnr(bufnr)
  local document = { uri = uri }
  local position = entry_position(bufnr, env("EVOTEAM_NVIM_ENTRY"))
  local lines = vim.api.nvim_buf_line_count(bufnr)
  local whole = { start = { line = 0, character = 0 }, ["end"] = { line = lines, character = 0 } }
  out.position = position

  if caps.hoverProvider then
    request(client, bufnr, "hover", "textDocument/hover", { textDocument = document, position = position })
  end
  if caps.codeLensProvider then
    request(client, bufnr, "code_lens", "textDocument/codeLens", { textDocument = document })
  end
  if caps.inlayHintProvider then
    request(client, bufnr, "inlay_hints", "textDocument/inlayHint", { textDocument = document, range = whole })
  end
  if caps.codeActionProvider then
    local here = { start = position, ["end"] = position }
    request(client, bufnr, "code_actions", "textDocument/codeAction", {
      textDocument = document,
      range = here,
      context = { diagnostics = {} },
    })
  end
  local commands = (caps.executeCommandProvider or {}).commands or {}
  if vim.tbl_contains(commands, "evoteam.runs") then
    request(client, bufnr, "runs", "workspace/executeCommand", { command = "evoteam.runs", arguments = {} })
  end
  if vim.tbl_contains(features, "diagnostics") then
    wait("textDocument/publishDiagnostics", function()
      for _, published in ipairs(out.diagnostics) do
        if published.uri == uri then
          return true
        end
      end
      return false
    end)
  end

  vim.lsp.stop_client(client_id)
  wait("the server to exit", function()
    return out.exit ~= nil
  end)
end

local ok, err = pcall(main)
if not ok then
  out.error = tostring(err)
end
write_out()
vim.cmd("qa!")

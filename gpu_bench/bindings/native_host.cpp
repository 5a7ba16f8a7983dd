// evoteam's native host: runs one C ABI kernel outside the worker (see host_program.py, which fills in the
// @...@ placeholders for one entry-point signature and builds it).
#include <cerrno>
#include <cfenv>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <linux/capability.h>
#include <linux/filter.h>
#if __has_include(<linux/landlock.h>)
#include <linux/landlock.h>
#endif
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

typedef int (*entry_t)(@PARAMS@);
static const int kArgs = @NARGS@;
static const int kMaxBindings = 64;
static const int kMaxBuffers = 256;

struct ArgSpec { uint32_t kind, buffer; uint64_t offset; int64_t integer; double real; };
union Slot { void* p; double d; int64_t i; };
struct Binding { uint32_t id, nbuffers; void* base[kMaxBuffers]; uint64_t size[kMaxBuffers]; Slot slot[kArgs > 0 ? kArgs : 1]; };
static Binding* bindings[kMaxBindings];

static int call(entry_t fn, const Slot* s) { return fn(@CALL@); }

// Installs the worker's seccomp program (``confine.py``: ``n`` instructions, built for this host's pid) on every
// thread, after making the host non-dumpable (no other process of the user may open its memory) and giving up
// every capability (as ``confine.drop_capabilities``). 0 when done.
static int confine(const char* code, size_t n) {
  static struct sock_filter filter[4096];
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || n > sizeof filter / sizeof filter[0]) return -1;
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int capability = 0; capability < 64; ++capability) prctl(PR_CAPBSET_DROP, capability, 0, 0, 0);
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct none[2] = {};
  if (syscall(SYS_capset, &header, none) != 0) return -1;
  if (n == 0) return 0;  // no program for this machine
  memcpy(filter, code, n * sizeof filter[0]);
  struct sock_fprog program = {(unsigned short)n, filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program);
}

static int sock = -1;

// The floating-point state of the host's thread (the one that calls the kernel): the rounding mode, and on
// x86 the MXCSR's flush-to-zero and denormals-are-zero bits. Reported when a call left it changed.
static unsigned fp_state() {
  unsigned state = (unsigned)fegetround();
#if defined(__x86_64__)
  state ^= (_mm_getcsr() & 0x8040u) << 16;
#endif
  return state;
}
// No file or folder may be written, made or removed, and no TCP port bound or connected (where Landlock has
// the rule), by the kernel or anything it loads: files already open (its output to the log) stay usable.
// True when the restriction holds; false where the kernel has no Landlock.
static bool read_only_files() {
#if defined(LANDLOCK_CREATE_RULESET_VERSION) && defined(SYS_landlock_create_ruleset)
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return false;
  struct landlock_ruleset_attr attr = {};
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
      LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
      LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
      LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
#ifdef LANDLOCK_ACCESS_NET_BIND_TCP
  if (abi >= 4) attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
#endif
  int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) return false;
  bool done = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) == 0;
  close(ruleset);
  return done;
#else
  return false;
#endif
}

static void reply(const char* text) { send(sock, text, strlen(text), 0); }

static void release(uint32_t id) {
  Binding* b = bindings[id % kMaxBindings];
  if (b == nullptr || b->id != id) return;
  for (uint32_t k = 0; k < b->nbuffers; ++k) munmap(b->base[k], b->size[k]);
  delete b;
  bindings[id % kMaxBindings] = nullptr;
}

static void bind(const char* message, ssize_t length, struct msghdr* header) {
  uint32_t id, nbuffers, nargs;
  memcpy(&id, message + 4, 4); memcpy(&nbuffers, message + 8, 4); memcpy(&nargs, message + 12, 4);
  int fds[kMaxBuffers]; int nfds = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(header); c != nullptr; c = CMSG_NXTHDR(header, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int k = 0; k < n && nfds < kMaxBuffers; ++k) memcpy(&fds[nfds++], CMSG_DATA(c) + k * sizeof(int), sizeof(int));
    }
  }
  size_t want = 16 + 8 * (size_t)nbuffers + sizeof(ArgSpec) * (size_t)nargs;
  if (nargs != (uint32_t)kArgs || nbuffers > (uint32_t)kMaxBuffers || (uint32_t)nfds != nbuffers || (size_t)length != want) {
    for (int k = 0; k < nfds; ++k) close(fds[k]);
    reply("Ea malformed binding");
    return;
  }
  release(id);
  Binding* b = new Binding();
  b->id = id; b->nbuffers = 0;
  for (uint32_t k = 0; k < nbuffers; ++k) {
    memcpy(&b->size[k], message + 16 + 8 * k, 8);
    void* base = mmap(nullptr, b->size[k], PROT_READ | PROT_WRITE, MAP_SHARED, fds[k], 0);
    close(fds[k]);
    if (base == MAP_FAILED) { for (uint32_t j = k + 1; j < nbuffers; ++j) close(fds[j]); delete b; reply("Ecannot map a buffer"); return; }
    b->base[k] = base; b->nbuffers = k + 1;
  }
  const char* specs = message + 16 + 8 * nbuffers;
  for (int a = 0; a < kArgs; ++a) {
    ArgSpec spec; memcpy(&spec, specs + sizeof(ArgSpec) * a, sizeof(ArgSpec));
    if (spec.kind == 0) b->slot[a].p = (char*)b->base[spec.buffer < nbuffers ? spec.buffer : 0] + spec.offset;
    else if (spec.kind == 1) b->slot[a].d = spec.real;
    else b->slot[a].i = spec.integer;
  }
  bindings[id % kMaxBindings] = b;
  reply("K");
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  sock = atoi(argv[4]);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != (pid_t)atol(argv[3])) return 3;  // the worker died before we armed the death signal
  setvbuf(stdout, nullptr, _IOLBF, 0);
  static char message[65536];
  ssize_t got = recv(sock, message, sizeof message, 0);  // the worker's first message: "P" and the program
  if (got < 1 || message[0] != 'P' || (got - 1) % sizeof(struct sock_filter) != 0) { reply("Eno seccomp program"); return 4; }
  bool files_read_only = read_only_files();
  if (confine(message + 1, (size_t)(got - 1) / sizeof(struct sock_filter)) != 0) { reply("Ecannot install the seccomp filter"); return 4; }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) { char text[1024]; snprintf(text, sizeof text, "Ecannot load %s", dlerror()); reply(text); return 5; }
  entry_t fn = (entry_t)dlsym(library, argv[2]);
  if (fn == nullptr) { reply("Enot exported"); return 6; }
  const unsigned fp_start = fp_state();
  reply(files_read_only ? "KL" : "K");
  static char control[CMSG_SPACE(sizeof(int) * kMaxBuffers)];
  for (;;) {
    struct iovec io = {message, sizeof message};
    struct msghdr header = {};
    header.msg_iov = &io; header.msg_iovlen = 1;
    header.msg_control = control; header.msg_controllen = sizeof control;
    ssize_t length = recvmsg(sock, &header, MSG_CMSG_CLOEXEC);
    if (length < 0 && errno == EINTR) continue;  // a signal of the kernel's own (an alarm) is no request
    if (length <= 0) { fflush(nullptr); return 0; }
    if (message[0] == 'B' && length >= 16) { bind(message, length, &header); continue; }
    if (length < 8) continue;
    uint32_t id; memcpy(&id, message + 4, 4);
    if (message[0] == 'F') { release(id); continue; }
    if (message[0] != 'C' || length != 16) continue;
    Binding* b = bindings[id % kMaxBindings];
    char answer[16] = {'R'};
    int32_t rc = -1;
    if (b != nullptr && b->id == id) rc = call(fn, b->slot); else answer[0] = 'U';
    fflush(nullptr);  // what the kernel printed is in the log before its answer: the host ends with SIGKILL
    answer[1] = fp_state() != fp_start ? 1 : 0;  // the kernel left the floating-point state changed
    memcpy(answer + 4, &rc, 4); memcpy(answer + 8, message + 8, 8);
    while (send(sock, answer, sizeof answer, 0) < 0 && errno == EINTR) {}
    kill(0, SIGSTOP);  // every thread at once: the worker's clock ends when this stop does, and continues us
  }
}

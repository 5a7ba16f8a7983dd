# A KernelBench level-1 problem (matmul of lower triangular matrices), in KernelBench's own format: its inputs
# are structured (torch.tril of normals), so they are recorded rather than drawn afresh as standard normals.
import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that performs a matrix multiplication (C = A * B) where A and B are lower triangular matrices.
    """

    def __init__(self):
        super(Model, self).__init__()  # noqa: UP008 (KernelBench's spelling, kept on purpose)

    def forward(self, A, B):  # noqa: N803 (KernelBench's names)
        """
        Performs matrix multiplication of lower triangular matrices A and B.

        Args:
            A (torch.Tensor): Lower triangular matrix of shape (N, N).
            B (torch.Tensor): Lower triangular matrix of shape (N, N).

        Returns:
            torch.Tensor: The result of matrix multiplication C of shape (N, N).
        """
        return torch.tril(torch.matmul(A, B))


M = 4096


def get_inputs():
    A = torch.randn(M, M)  # noqa: N806
    B = torch.randn(M, M)  # noqa: N806
    A = torch.tril(A)  # noqa: N806
    B = torch.tril(B)  # noqa: N806
    return [A, B]


def get_init_inputs():
    return []  # No special initialization inputs needed

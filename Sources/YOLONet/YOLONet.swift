import Tensor

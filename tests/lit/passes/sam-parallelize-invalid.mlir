// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=j factor=2})' 2>&1 | filecheck %s
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=i factor=0})' 2>&1 | filecheck %s --check-prefix=FACTOR

// Lanes at a sparse j under k: the spacc over k would need k's whole stream in every lane, and
// with B's rows sparse, dealing j by position would split one coordinate over several lanes.
// CHECK: error: region r0_matmul: cannot parallelize at 'j': sam.spacc #{{[0-9]+}} also reads sam.scan #{{[0-9]+}}, which is not iterated along it (and 'j' is sparse, so its lanes cannot share that stream)
// FACTOR: error: sam-parallelize: factor must be a positive integer, got 0
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x3xf32, #csr> {fuseflow.name = "B"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x3xf32, #csr>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

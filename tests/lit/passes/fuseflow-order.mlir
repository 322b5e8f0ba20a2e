// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=auto})' | filecheck %s --check-prefix=AUTO
// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=1})' | filecheck %s --check-prefix=K1
// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=i,k,j,l},lower-to-sam)' | filecheck %s --check-prefix=NAMED
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=i,q,j})' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=99})' 2>&1 | filecheck %s --check-prefix=RANGE

// The chain X = (A @ B) @ C with A, B, C CSR: variables i, j (output), k (outer sum), l (inner
// sum). Only i,l,k,j is concordant with all three storage orders (Gustavson twice); it is
// enumerated first and, with the default density 0.1 of compressed tensors, the cycle model
// (fuseflow-order ranks its shortlist by predicted cycles) picks it.
// AUTO: fuseflow.orders = {full = "i,l,k,j"}

// Enumerated second: the first discordant order, inner products at both levels; B and C are
// re-laid out (column-major) by the lowering and the inner product over l is recomputed per j.
// K1: fuseflow.orders = {full = "i,j,k,l"}

// A named order: root (i,k,j) accumulates over k (spacc), the inner sum over l is an inner
// product hoisted per (i,k) and reduced innermost; B is read column-major.
// NAMED: "sam.reduce"({{.*}}) {index_var = "l", kind = "sum"
// NAMED: "sam.spacc"({{.*}}) {index_var = "k", kind = "sum", {{.*}}order = 1
// NAMED: {levels = ["dense", "compressed"], mode_order = [1, 0], name = "B"

// BAD: error: region full: order names unknown index variable(s) q; the region's variables are i, j, k, l
// RANGE: error: region full: order=99 but the region has 12 enumerated orders (0..11)
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<6x6xf32, #csr> {fuseflow.name = "A"}, %B: tensor<6x6xf32, #csr> {fuseflow.name = "B"}, %C: tensor<6x6xf32, #csr> {fuseflow.name = "C"}) -> tensor<6x6xf32> {
  %cst = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<6x6xf32>
  %f0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<6x6xf32>) -> tensor<6x6xf32>
  %t = linalg.matmul ins(%A, %B : tensor<6x6xf32, #csr>, tensor<6x6xf32, #csr>) outs(%f0 : tensor<6x6xf32>) -> tensor<6x6xf32>
  %y = linalg.matmul ins(%t, %C : tensor<6x6xf32>, tensor<6x6xf32, #csr>) outs(%f0 : tensor<6x6xf32>) -> tensor<6x6xf32>
  return %y : tensor<6x6xf32>
}

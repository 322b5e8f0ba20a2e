// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=i factor=2})' | filecheck %s
// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=k factor=2})' | filecheck %s --check-prefix=REDUCED
// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=j factor=2})' | filecheck %s --check-prefix=INNER
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(lower-to-sam,sam-parallelize{level=q factor=2})' 2>&1 | filecheck %s --check-prefix=UNKNOWN

// SpMM Y(i,j) = sum_k A(i,k) B(k,j) with A CSR, B dense, in two lanes at i. A's row refs and
// row coordinates are forked (depth 0: the level's own streams), everything under i is copied
// per lane, and the streams into the writers are joined: the j coordinates at depth 1 (rows end
// with S0), the values at depth 1. The i coordinates go to their writer unforked.
// CHECK-LABEL: "sam.graph"
// CHECK: %[[I:.*]]:2 = "sam.scan"({{.*}}) {{{.*}}index_var = "i"
// CHECK: %[[F:.*]]:2 = "sam.fork"(%[[I]]#0) {depth = 0 : i64, factor = 2 : i64, index_var = "i"
// CHECK-COUNT-2: "sam.spacc"
// CHECK: "sam.write_crd"(%[[I]]#1) {{{.*}}level = 0
// CHECK: "sam.join"({{.*}}) {depth = 1 : i64, factor = 2 : i64, index_var = "i"
// CHECK: "sam.write_crd"
// CHECK: %[[V:.*]] = "sam.join"({{.*}}) {depth = 1 : i64, factor = 2 : i64, index_var = "i"
// CHECK: "sam.write_val"(%[[V]])

// Lanes at the reduced variable k: the spacc over k is an exit, so the lanes' (j, value)
// streams are joined before it (depth 1: one j fiber per k) and it accumulates as before.
// REDUCED: "sam.fork"({{.*}}) {depth = 0 : i64, factor = 2 : i64, index_var = "k"
// REDUCED: %[[C:.*]] = "sam.join"({{.*}}) {depth = 1 : i64, factor = 2 : i64, index_var = "k"
// REDUCED: %[[V:.*]] = "sam.join"({{.*}}) {depth = 1 : i64, factor = 2 : i64, index_var = "k"
// REDUCED: "sam.spacc"(%[[C]], {{.*}}, %[[V]]) {index_var = "k"

// Lanes at j, which lies under k (Gustavson): each lane's spacc accumulates its share of the
// j coordinates and reads all of k's coordinates, copied to every lane (depth -1). That is
// correct because j is dense: every fiber holds every coordinate, so dealing by position is
// dealing by coordinate (sam-parallelize-invalid.mlir: a sparse j is refused).
// INNER-LABEL: "sam.graph"
// INNER: "sam.fork"({{.*}}) {depth = -1 : i64, factor = 2 : i64, index_var = "j"
// INNER-COUNT-2: "sam.spacc"
// INNER: "sam.join"({{.*}}) {depth = 0 : i64, factor = 2 : i64, index_var = "j"

// UNKNOWN: error: region r0_matmul: cannot parallelize at q: no such index variable (variables: i, j, k)
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x3xf32> {fuseflow.name = "B"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

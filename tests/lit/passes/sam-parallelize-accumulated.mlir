// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},lower-to-sam,sam-parallelize{level=k factor=2})' | filecheck %s

// Y = (A @ B) @ C, Gustavson twice: T(i,k) = sum_l A(i,l) B(l,k) is accumulated by a spacc over
// l whose k coordinates drive the lanes (the locate of C at k). The spacc's values hold one
// element per k coordinate, so they are dealt with the coordinates (depth 0), not copied to
// every lane (depth -1 would pair each lane's coordinates with every value: GCN's first layer
// in order i,l,k,j broke the repeat's stream protocol that way).
// CHECK: %[[T:.*]]:2 = "sam.spacc"({{.*}}) {index_var = "l", kind = "sum"
// CHECK: %[[C:.*]] = "sam.locate"(%[[T]]#0, {{.*}}) {{{.*}}index_var = "k"
// CHECK: "sam.fork"(%[[C]]) {depth = 0 : i64, factor = 2 : i64, index_var = "k"
// CHECK: "sam.fork"(%[[T]]#1) {depth = 0 : i64, factor = 2 : i64, index_var = "k"
// CHECK: "sam.join"({{.*}}) {depth = 1 : i64, factor = 2 : i64, index_var = "k"
// CHECK: "sam.spacc"({{.*}}, %[[T]]#0, {{.*}}) {index_var = "k", kind = "sum"
#csr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 : dense, d1 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csr> {fuseflow.name = "A"}, %B: tensor<5x6xf32> {fuseflow.name = "B"}, %C: tensor<6x3xf32> {fuseflow.name = "C"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x6xf32>
  %f0 = linalg.fill ins(%cst : f32) outs(%e0 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csr>, tensor<5x6xf32>) outs(%f0 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x3xf32>
  %f1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%t, %C : tensor<4x6xf32>, tensor<6x3xf32>) outs(%f1 : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// RUN: fuseflow-opt %s --pass-pipeline='builtin.module(block{size=4},lower-to-sam)' | filecheck %s
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(block{size=3},lower-to-sam)' 2>&1 | filecheck %s --check-prefix=SIZE

// Sparsity blocking of Y = A @ B with A bcsr<4> (MLIR's BSR encoding) and B dense: the
// dataflow iterates 4x4 blocks (A's block rows dense, block columns compressed), values are
// tiles. The product of an (i,k) tile and a (k,j) tile is an (i,k,j) tile that the spacc over
// k contracts into the (i,j) output tile; the writer stores (i,j) tiles.
// CHECK-LABEL: "sam.graph"
// CHECK: "sam.scan"({{.*}}) {dim = 2 : i64, format = "compressed", index_var = "k"
// CHECK: %[[A:.*]] = "sam.load"({{.*}}) {axes = ["i", "k"], tensor = "A"} : (!sam.ref) -> !sam.val<tensor<4x4xf32>>
// CHECK: %[[B:.*]] = "sam.load"({{.*}}) {axes = ["k", "j"], tensor = "B"} : (!sam.ref) -> !sam.val<tensor<4x4xf32>>
// CHECK: %[[P:.*]] = "sam.alu"(%[[A]], %[[B]]) {axes = ["i", "k", "j"], op = "mul"{{.*}} -> !sam.val<tensor<4x4x4xf32>>
// CHECK: "sam.spacc"({{.*}}, %[[P]]) {axes = ["i", "j"], index_var = "k"{{.*}} -> (!sam.crd, !sam.val<tensor<4x4xf32>>)
// CHECK: "sam.write_val"({{.*}}) {axes = ["i", "j"], tensor = "out0"}
// CHECK: {block = 4 : i64, levels = ["dense", "compressed"], mode_order = [0, 1], name = "A"

// SIZE: error: region r0_matmul: block size 3 does not divide index variable i (size 8); choose a block size dividing every dimension
#bsr = #sparse_tensor.encoding<{map = (d0, d1) -> (d0 floordiv 4 : dense, d1 floordiv 4 : compressed, d0 mod 4 : dense, d1 mod 4 : dense)}>
func.func @main(%A: tensor<8x8xf32, #bsr> {fuseflow.name = "A"}, %B: tensor<8x4xf32> {fuseflow.name = "B"}) -> tensor<8x4xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %y = linalg.matmul ins(%A, %B : tensor<8x8xf32, #bsr>, tensor<8x4xf32>) outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

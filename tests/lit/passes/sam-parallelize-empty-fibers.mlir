// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=k,i,j},lower-to-sam,sam-parallelize{level=k factor=2})' 2>&1 | filecheck %s
// RUN: not fuseflow-opt %s --pass-pipeline='builtin.module(fuseflow-partition{schedule=full},fuseflow-order{order=k,i,j},lower-to-sam,sam-parallelize{level=j factor=2})' 2>&1 | filecheck %s --check-prefix=ABOVE

// SpMM as outer products (order k,i,j, A stored CSC): lanes at k would join the (i, j, value)
// streams two levels below k, under A's compressed i level. Where a lane's column k of A is
// empty, the join lost count of the elements (a protocol error in the simulator), so the pass
// refuses it. Lanes at j would join a stream copied from above j (depth -1) into a writer, which the
// dialect's verifier rejected; the pass now refuses it with its reason.
// CHECK: error: region full: cannot parallelize at 'k': the lanes' stream into sam.spacc #{{[0-9]+}} lies 2 levels below it, under the compressed sam.scan #{{[0-9]+}}, whose empty fibers the join cannot count yet
// ABOVE: error: region full: cannot parallelize at 'j': the lanes' stream into sam.write_crd #{{[0-9]+}} lies above the level
#csc = #sparse_tensor.encoding<{map = (d0, d1) -> (d1 : dense, d0 : compressed)}>
func.func @main(%A: tensor<4x5xf32, #csc> {fuseflow.name = "A"}, %B: tensor<5x3xf32> {fuseflow.name = "B"}) -> tensor<4x3xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %y = linalg.matmul ins(%A, %B : tensor<4x5xf32, #csc>, tensor<5x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

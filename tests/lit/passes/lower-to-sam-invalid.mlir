// RUN: fuseflow-opt %s --split-input-file --lower-to-sam --verify-diagnostics
// Input the lowering cannot handle is reported at the offending op.

func.func @main(%A: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{writes a diagonal}}
  %0 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i, i)>], iterator_types = ["parallel"]} ins(%e : tensor<4xf32>) outs(%A : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @main(%A: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{unsupported op 'tensor.insert_slice'}}
  %0 = tensor.insert_slice %A into %A[0, 0] [4, 4] [1, 1] : tensor<4x4xf32> into tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// RUN: fuseflow-opt %s --split-input-file --verify-diagnostics
// The graph's `tensors` schema, one malformed field per chunk (the simulator front end reads
// these fields; a hand-written graph must fail here, not with a KeyError later).

// expected-error @+1 {{'tensors' entry 0: missing field 'shape'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", levels = ["dense"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: missing field 'levels'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: missing field 'mode_order'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], levels = ["dense"]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: missing field 'name'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{role = "input", shape = [4], levels = ["dense"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: missing field 'role'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", shape = [4], levels = ["dense"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 'role' must be "input" or "output"}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "scratch", shape = [4], levels = ["dense"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 'shape' must be an array of non-negative integers}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [-4], levels = ["dense"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: unknown level format 'sparse' (dense or compressed)}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], levels = ["sparse"], mode_order = [0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 1 levels for a rank-2 shape}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4, 4], levels = ["dense"], mode_order = [0, 1]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 'mode_order' must be a permutation of 0..1}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4, 4], levels = ["dense", "compressed"], mode_order = [0, 0]}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 'copy_of' must be a string}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], levels = ["dense"], mode_order = [0], copy_of = 3}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 0: tensor A: 'block' must be a positive integer}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], levels = ["dense"], mode_order = [0], block = 0}]} : () -> ()

// -----

// expected-error @+1 {{'tensors' entry 1: unknown field 'format'}}
"sam.graph"() ({
}) {sym_name = "g", tensors = [{name = "A", role = "input", shape = [4], levels = ["dense"], mode_order = [0]}, {name = "B", role = "output", shape = [4], levels = ["dense"], mode_order = [0], format = "csr"}]} : () -> ()

// The committed corpus's replay (CTest, no PyTorch): each line of a golden file is
//   {"case": <a generated case>, "expect": <PyTorch's answer, written by tools/differential.py>}
// with "expect" either {"raises": true, "error_node": i, "torch_raises": bool} (kiln must raise
// at node i; torch_raises false marks a documented kiln-only refusal) or {"nodes": {"<i>":
// tensor}, "grads": [tensor or null]}: PyTorch's float64 values of the nodes it lists and of
// every gradient. kiln matches them within the case dtype's tolerance (docs/
// differential-testing.md): |kiln - torch| <= tol (|torch| + max |torch| over the tensor), tol
// 1e-9 for float64, 1e-5 for float32 and 2^-6 for bf16 cases; NaN where PyTorch has NaN, the
// same infinity where it has one; max's indices exactly.
#pragma once

#include <string>
#include <vector>

namespace kiln::differential {

// Replays every case of the files; prints a line per failure and a count per family. Returns
// the number of failures (cases, plus families of the op table with no case).
int check_golden(const std::vector<std::string>& files, const std::string& op_table_dir);

}  // namespace kiln::differential

#pragma once
// The recurrent layers' view of a pass (Ops::causal_conv1d, Ops::ssm_scan): per request,
// kStateSeqInts int32 = its first token row, its token count, its slot in the state pool, and 1
// when it resumes from the slot's state (0: from zeros, a request with nothing cached).
namespace strata {

constexpr int kStateSeqInts = 4;

}  // namespace strata

#pragma once
// A digest of the trainer's whole training state: the model's parameters and buffers and the
// optimizer's momentum, so that two runs can be compared bit for bit from their metrics files
// (the "done" record's "state_sha256"): a recovered run must end exactly where an undisturbed one
// does. Light header: LibTorch only in the .cc.

#include <string>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class SGD;
}

namespace mxrun::trainer {

// SHA-256 over each parameter and buffer in registration order (name, dtype, shape, then its bytes
// on the CPU, contiguous), then each parameter's SGD momentum buffer in the optimizer's order
// ("none" where it has none yet). Equal digests: bitwise-equal state. Copies each tensor to the CPU
// once: for the end of a run, not for every step.
// `with_buffers` false leaves out the buffers (BatchNorm's running statistics): the "done" record's
// "weights_sha256". Those statistics are each rank's own (never reduced in training), so a run that
// lost rank 0 lost rank 0's with it, while its parameters and momentum must still be bitwise equal.
std::string StateDigest(torch::nn::Module& model, torch::optim::SGD& optimizer,
                        bool with_buffers = true);

}  // namespace mxrun::trainer

// A trainable tensor of a layer, and the named handle to it that the rest
// of the runtime walks.
//
//   class Scale : public Layer {
//    public:
//     explicit Scale(Device device) : w_(Tensor::Full({1}, 1.f, device)) {}
//     std::vector<NamedParameter> Parameters() override { return {{"scale.w", &w_}}; }
//     ...  // Forward reads w_.value(), Backward adds into w_.grad()
//    private:
//     Parameter w_;
//   };
//
// A Parameter owns three tensors: the float32 master value (what optimizers
// update and checkpoints keep), its float32 gradient, and, for a layer that
// computes in bfloat16 on a device that multiplies it, the working copy in
// that dtype (layers/precision.h). The layer owns the Parameter and decides
// whether it computes with the working copy; everything else (optimizers,
// the reducer, checkpoints, the sharded optimizer) reaches it through the
// NamedParameter handles of Layer::Parameters(). To lay parameters out in
// flat buffers (the reducer's gradient buckets, the sharded optimizer's
// values and working copies) they move the value, the gradient or the
// working copy into a view of that buffer through the Parameter
// (MoveGradInto, MoveValueInto, MoveWorkingInto): the layer reads and writes
// its tensors through the Parameter, so it follows without knowing.
#ifndef TANDEM_LAYERS_PARAMETER_H_
#define TANDEM_LAYERS_PARAMETER_H_

#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace tandem {

class Parameter {
 public:
  Parameter() = default;
  // `value` (float32) as the master; the gradient starts as zeros of its
  // shape on its device.
  explicit Parameter(Tensor value);
  // `value` with `grad`, a float32 tensor of its shape, as its gradient.
  Parameter(Tensor value, Tensor grad);

  Tensor& value() { return value_; }
  const Tensor& value() const { return value_; }
  // Undefined after a Backward that folded the optimizer step in
  // (BackwardArgs::update) until the next Backward that writes it.
  Tensor& grad() { return grad_; }
  const Tensor& grad() const { return grad_; }
  // The working copy, in the dtype given to KeepWorkingCopy; undefined
  // before. SyncWorkingCopies (layers/layer.h) fills it from the value.
  Tensor& working() { return working_; }
  const Tensor& working() const { return working_; }

  // Keep a working copy in `dtype`: a placeholder on the value's device
  // until SyncWorkingCopies casts the value into it.
  void KeepWorkingCopy(DType dtype);
  // The gradient lives in `view` from now on: a float32 tensor of its shape
  // on its device, inside a larger buffer. Its current values are copied
  // there (zeros where it had none). Throws naming `name` when the view
  // does not fit.
  void MoveGradInto(Tensor view, const std::string& name);
  // The same for the value.
  void MoveValueInto(Tensor view, const std::string& name);
  // The working copy lives in `view` from now on: a tensor of the value's
  // shape, the working copy's dtype and device, inside a larger buffer (the
  // sharded optimizer gathers working copies there). The value is cast into
  // it. Throws naming `name` when the parameter keeps no working copy or
  // the view does not fit.
  void MoveWorkingInto(Tensor view, const std::string& name);
  // The value moved to `device`, the gradient zeros there, the working copy
  // (if kept) a placeholder there.
  void MoveTo(Device device);

 private:
  Tensor value_, grad_, working_;
};

// A layer's parameter as Layer::Parameters() hands it out: its name (Note
// [Parameter names] in layers/layer.h), the Parameter, and whether the
// layer computes with its working copy on its current device.
struct NamedParameter {
  std::string name;
  Parameter* parameter = nullptr;
  bool uses_working = false;

  Tensor& value() const { return parameter->value(); }
  Tensor& grad() const { return parameter->grad(); }
  // The working copy the layer computes with, or null where it computes
  // with the value itself.
  Tensor* working() const { return uses_working ? &parameter->working() : nullptr; }
};

}  // namespace tandem

#endif  // TANDEM_LAYERS_PARAMETER_H_

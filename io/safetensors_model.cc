// A model's parameters to and from safetensors tensors (io/safetensors.h).
#include <algorithm>
#include <set>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "io/safetensors.h"

namespace tandem {
namespace {

// What LoadSafetensors will copy, and every problem that stops it. Built in
// full before anything changes.
struct ImportPlan {
  std::vector<std::pair<Tensor*, const SafetensorsTensor*>> copies;
  std::vector<std::string> problems;
};

ImportPlan PlanImport(const SafetensorsFile& file, Layer& model) {
  ImportPlan plan;
  std::set<std::string> used;
  for (const NamedParameter& p : model.Parameters()) {
    const Shape& shape = p.value().shape();
    TANDEM_CHECK(used.insert(p.name).second)
        << "importing safetensors into model '" << model.Name()
        << "': two parameters are named '" << p.name << "'; names key the file";
    auto it = file.tensors.find(p.name);
    if (it == file.tensors.end()) {
      plan.problems.push_back("the file has no tensor '" + p.name +
                              "' (the model's is " + ShapeToString(shape) + ")");
      continue;
    }
    const SafetensorsTensor& t = it->second;
    if (t.dtype != "F32" && t.dtype != "BF16") {
      plan.problems.push_back("tensor '" + p.name + "' is " + t.dtype +
                              "; Tandem imports F32 and BF16 (convert it "
                              "first, e.g. tensor.float() in PyTorch)");
    } else if (t.shape != shape) {
      plan.problems.push_back("tensor '" + p.name + "' is " + ShapeToString(t.shape) +
                              " but the model's is " + ShapeToString(shape));
    } else if (t.data.size() != static_cast<size_t>(NumElements(shape)) *
                                    SafetensorsDTypeSize(t.dtype)) {
      plan.problems.push_back("tensor '" + p.name + "' holds " +
                              std::to_string(t.data.size()) + " bytes, not " +
                              t.dtype + " " + ShapeToString(shape));
    } else {
      plan.copies.emplace_back(&p.value(), &t);
    }
  }
  for (const auto& [name, t] : file.tensors) {
    if (used.count(name) == 0) {
      plan.problems.push_back("tensor '" + name + "' " + ShapeToString(t.shape) +
                              " matches no parameter of the model");
    }
  }
  return plan;
}

// The first three problems and how many more there are.
std::string DescribeProblems(const std::vector<std::string>& problems,
                             const Layer& model, const std::string& source) {
  std::ostringstream message;
  message << source << ": does not fit model '" << model.Name()
          << "'; nothing was imported: ";
  const size_t shown = std::min<size_t>(problems.size(), 3);
  for (size_t i = 0; i < shown; ++i) message << (i ? "; " : "") << problems[i];
  if (problems.size() > shown) {
    message << " (and " << problems.size() - shown << " more)";
  }
  message << ". Names and shapes must be those of the model's parameters: "
          << "was the file written for a model of other sizes?";
  return message.str();
}

}  // namespace

std::map<std::string, SafetensorsTensor> ParametersToSafetensors(Layer& model,
                                                                 DType dtype) {
  std::map<std::string, SafetensorsTensor> tensors;
  for (const NamedParameter& p : model.Parameters()) {
    // ToVector waits for the device and widens any dtype to float.
    auto inserted = tensors.emplace(
        p.name, SafetensorsFromFloats(p.value().ToVector(), p.value().shape(), dtype));
    TANDEM_CHECK(inserted.second)
        << "exporting model '" << model.Name() << "' to safetensors: two "
        << "parameters are named '" << p.name << "'; names key the file";
  }
  return tensors;
}

void ExportSafetensors(const std::string& path, Layer& model,
                       const SafetensorsExportOptions& options) {
  WriteSafetensors(path, ParametersToSafetensors(model, options.dtype),
                   options.metadata);
}

void LoadSafetensors(const SafetensorsFile& file, Layer& model,
                     const std::string& source) {
  // Phase 1: check everything.
  const ImportPlan plan = PlanImport(file, model);
  TANDEM_CHECK(plan.problems.empty()) << DescribeProblems(plan.problems, model, source);
  // Phase 2: copy. Nothing here can fail on a checked plan.
  for (const auto& [value, t] : plan.copies) {
    value->CopyFrom(Tensor::FromVector(SafetensorsToFloats(*t), t->shape,
                                       Device::Cpu(), value->dtype()));
  }
  // The file holds masters; a mixed-precision model computes with copies.
  SyncWorkingCopies(model);
}

void ImportSafetensors(const std::string& path, Layer& model) {
  LoadSafetensors(ReadSafetensors(path), model, path);
}

}  // namespace tandem

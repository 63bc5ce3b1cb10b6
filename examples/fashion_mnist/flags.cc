#include "examples/fashion_mnist/flags.h"

#include <string>

#include "trainer/flags.h"

namespace tandem {

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    FashionMnistConfig& config, std::ostream& out,
                                    std::ostream& err) {
  TrainerCommandLine cli("Tandem: train an MLP on Fashion-MNIST with data parallelism", config);
  CLI::App& app = cli.app();
  app.footer(
      "Examples:\n"
      "  fashion_mnist --workers=4 --epochs=3      4 worker threads\n"
      "  mpirun -np 4 fashion_mnist                4 processes (mode mpi)\n"
      "  fashion_mnist --device=cuda --workers=2   2 GPUs\n"
      "Exit status: 0 when training ends, 1 when it fails, 2 for a usage error.");
  app.option_defaults()->group("Data");
  app.add_option("--data_dir", config.data_dir,
                 "directory holding the four Fashion-MNIST .gz files");
  app.add_option("--max_train", config.max_train,
                 "use only the first N training examples (-1: all)");
  app.add_option("--max_test", config.max_test, "use only the first N test examples (-1: all)");
  app.option_defaults()->group("Model");
  std::string hidden = "512,256";
  app.add_option("--hidden", hidden, "hidden layer sizes, comma-separated (\"\": no hidden layer)");
  app.add_option("--activation", config.activation, "after each hidden layer")
      ->check(CLI::IsMember({"relu", "gelu", "tanh", "identity"}));
  app.add_option("--dropout", config.dropout,
                 "probability of dropping a hidden unit, 0 <= p < 1");
  return cli.Parse(argc, argv, out, err, [&] { config.hidden = ParseSizes(hidden); });
}

}  // namespace tandem

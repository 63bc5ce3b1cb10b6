// Tandem's version: the one place it is written. `fashion_mnist --version`
// prints "tandem " followed by it.
#ifndef TANDEM_EXAMPLES_FASHION_MNIST_VERSION_H_
#define TANDEM_EXAMPLES_FASHION_MNIST_VERSION_H_

namespace tandem {

inline constexpr char kTandemVersion[] = "0.1.0";

}  // namespace tandem

#endif  // TANDEM_EXAMPLES_FASHION_MNIST_VERSION_H_

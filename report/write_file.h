// Writes a whole report file (a plot, a trace) so that a reader never sees
// half of it: the text goes to "<path>.tmp", which is then renamed over
// `path`. A plot rewritten after every epoch stays viewable throughout.
//
//   WriteFileAtomically(config.plot_path, svg, "--plot");
#ifndef TANDEM_REPORT_WRITE_FILE_H_
#define TANDEM_REPORT_WRITE_FILE_H_

#include <string>

namespace tandem {

// Throws tandem::Error naming `flag`, `path` and the system's reason on
// failure, and leaves no temporary file behind.
void WriteFileAtomically(const std::string& path, const std::string& contents,
                         const std::string& flag);

}  // namespace tandem

#endif  // TANDEM_REPORT_WRITE_FILE_H_

#pragma once
// Reader for the CIFAR-10 binary distribution (cifar-10-batches-bin): data_batch_1.bin ..
// data_batch_5.bin for training and test_batch.bin for testing. Each record is 1 label byte
// (0-9) followed by 3072 pixel bytes; a file is a whole number of records.

#include <string>

#include "trainer/image_set.h"

namespace mxrun::trainer {

inline constexpr int kCifarRecordBytes = 1 + kImageBytes;  // 3073

// Appends the records of one file. Errors (std::runtime_error) name the file and the byte offset
// of the fault: a truncated record, a label outside 0-9, a file that cannot be read. On error
// nothing of that file is kept.
void AppendCifar10File(const std::string& path, ImageSet& into);

enum class Split { kTrain, kTest };

// Reads the training (five data_batch files) or test split from `dir`, which is the folder that
// holds the .bin files (cifar-10-batches-bin).
ImageSet ReadCifar10(const std::string& dir, Split split);

}  // namespace mxrun::trainer

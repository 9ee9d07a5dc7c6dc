#include <lmdb.h>
#include "crc32c.h"
#include "atomic_bits.h"

#include <lmdb.h>
#include "crc32c.h"

#include "kernels/types.h"

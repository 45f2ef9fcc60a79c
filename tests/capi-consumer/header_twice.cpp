// The same unit, compiled as C++17: the header twice, every type used.
#include "header_twice.c"

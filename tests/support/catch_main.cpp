// The one Catch2 main of the test programs: compiled once into a static library that every Catch2
// suite links (defining it is the slowest translation unit a test program has).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "test.h"
TEST(placeholder) { test_skip("not written yet"); }

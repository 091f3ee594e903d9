// cgdp command line (placeholder until the trainer lands).
#include <cstdio>
int main() { std::puts("cgdp"); return 0; }

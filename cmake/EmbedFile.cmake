# cmake -DINPUT=... -DOUTPUT=... -DSYMBOL=... -P EmbedFile.cmake
# Writes a C++ source with `std::string SYMBOL()` returning INPUT's bytes (binary safe).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR nbytes "${len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," body "${hex}")
string(REGEX REPLACE "(('\\\\x[0-9a-f][0-9a-f]',){16})" "\\1\n" body "${body}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT}; do not edit.\n#include <string>\n\
namespace distcrown::cli {\nnamespace {\nconst char k${SYMBOL}[] = {\n${body}\n'\\0'};\n}\n\
std::string ${SYMBOL}() { return std::string(k${SYMBOL}, ${nbytes}); }\n}\n")

# Sourced by the scripts that configure a build tree (setup.sh, sanitize.sh): the compiler cache
# (Debian's ccache) in a folder outside the clone, shared by every clone and build tree.
#   DISTCROWN_CCACHE_ARGS: the cmake arguments that put ccache in front of the C and C++ compilers
#   (empty, with a note, where ccache is missing or DISTCROWN_CCACHE=0).
# The cache is keyed by compiler, flags and preprocessed source, so a hit is the object file the
# compiler would have made; the absolute paths of different clones are rewritten relative to the
# clone (base_dir), so that a fresh clone in another folder hits the objects of the last one.
export CCACHE_DIR="${CCACHE_DIR:-${HOME}/.cache/distcrown/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-${ROOT}}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
# __FILE__ and __DATE__ differ across clones and days; the project's code uses neither in a way
# whose text matters (assert messages only).
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-time_macros,include_file_mtime,include_file_ctime}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
DISTCROWN_CCACHE_ARGS=()
if [[ "${DISTCROWN_CCACHE:-1}" != "0" ]] && command -v ccache >/dev/null 2>&1; then
  mkdir -p "$CCACHE_DIR"
  DISTCROWN_CCACHE_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  DISTCROWN_CCACHE_ARGS=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
  echo "[ccache] not used (DISTCROWN_CCACHE=0 or ccache missing): every build compiles from scratch" >&2
fi

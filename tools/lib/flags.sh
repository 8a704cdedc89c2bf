# The command-line parser of the tools/*.sh scripts (sourced, not run), so that every flag
# of every script is written the same ways:
#   * `--name VALUE` and `--name=VALUE` alike (the value may start with '-');
#   * a flag that takes no value (a switch) refuses `--name=VALUE`;
#   * an unknown flag, a missing value or a switch given a value prints "SCRIPT: why"
#     and the script's usage on stderr and exits 2.
#
# The script sets FLAGS_SCRIPT (its name in messages) and defines `usage_text` (prints its
# usage on stdout; `flags_header` prints the script's leading comment), then:
#
#   flags_begin "$@"
#   while flags_next; do                       # FLAG: the flag (without any =VALUE)
#     case "$FLAG" in
#       --cluster-dir|--dir) flag_value DIR ;;  # its value: after '=', or the next word
#       --kill) KILL=1 ;;                       # a switch: takes nothing
#       --) flags_rest REST ;;                  # every word after --, verbatim
#       -h|--help) usage_text; exit 0 ;;
#       -*) flag_unknown ;;
#       *) WORDS+=("$FLAG") ;;                  # a word that is not a flag
#     esac
#   done
#
# A branch that does not call flag_value is a switch: a value given to it with '=' is
# refused at the next flags_next.

FLAGS_ARGV=() FLAGS_I=0 FLAG="" FLAG_INLINE="" FLAG_HAS_INLINE=0

flags_begin() {
  FLAGS_ARGV=("$@") FLAGS_I=0 FLAG="" FLAG_INLINE="" FLAG_HAS_INLINE=0
}

# flags_next: the next word into FLAG; false when none is left. `--name=VALUE` gives
# FLAG=--name and keeps VALUE for flag_value.
flags_next() {
  if ((FLAG_HAS_INLINE)); then
    flags_error "$FLAG takes no value (got '$FLAG=$FLAG_INLINE')"
  fi
  ((FLAGS_I < ${#FLAGS_ARGV[@]})) || return 1
  FLAG=${FLAGS_ARGV[FLAGS_I]}
  FLAGS_I=$((FLAGS_I + 1))
  if [[ $FLAG == --[!=]*=* ]]; then
    FLAG_INLINE=${FLAG#*=} FLAG=${FLAG%%=*} FLAG_HAS_INLINE=1
  fi
  return 0
}

# flag_value VAR: the current flag's value into VAR (exits 2 if there is none).
flag_value() {
  local _flags_v
  if ((FLAG_HAS_INLINE)); then
    _flags_v=$FLAG_INLINE FLAG_HAS_INLINE=0
  elif ((FLAGS_I < ${#FLAGS_ARGV[@]})); then
    _flags_v=${FLAGS_ARGV[FLAGS_I]}
    FLAGS_I=$((FLAGS_I + 1))
  else
    flags_error "$FLAG needs a value"
  fi
  printf -v "$1" '%s' "$_flags_v"
}

# flags_rest ARRAY: the words not read yet into ARRAY, verbatim; flags_next is false next.
flags_rest() {
  local -n _flags_out=$1
  _flags_out=("${FLAGS_ARGV[@]:FLAGS_I}")
  FLAGS_I=${#FLAGS_ARGV[@]}
}

# flag_unknown: the current word is not one the script takes.
flag_unknown() {
  if [[ $FLAG == -* ]]; then flags_error "unknown flag '$FLAG'"; fi
  flags_error "unexpected argument '$FLAG'"
}

# flags_error WHY: "SCRIPT: WHY" and the usage on stderr, exit 2.
flags_error() {
  echo "${FLAGS_SCRIPT:-${0##*/}}: $*" >&2
  if declare -F usage_text >/dev/null; then usage_text >&2; fi
  exit 2
}

# flags_header FILE: FILE's leading comment block (after the #! line), without the '# '.
flags_header() {
  awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
}

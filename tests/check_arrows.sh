#!/usr/bin/env bash
# The arrows between the folders run one way (docs/architecture.md):
#   cli -> check -> runtime -> gen -> base, each also -> include/
# 1. Every #include "..." of a folder's sources resolves to its own folder or
#    one it may use (cli/ sees only include/ and check/).
# 2. No object calls a function defined in a folder it may not use: gen/
#    nothing of runtime/, cli/ nothing of runtime/, gen/ or base/ but the
#    public API (attnbwd_*), which it reaches through check/ and include/.
# 3. The objects of check/ call each other without a cycle.
# usage: check_arrows.sh SOURCE_DIR OBJECT_ARCHIVE_OR_FOLDER_OF_OBJECTS...
set -euo pipefail
src=$1
shift

declare -A may=(
  [cli]="cli check include"
  [check]="check include runtime gen base"
  [runtime]="runtime gen base include"
  [gen]="gen base include"
  [base]="base include"
)
folders="cli check runtime gen base include"
fail=0
complain() { echo "check_arrows: $*" >&2; fail=1; }

# ---- 1. includes ----
for dir in cli check runtime gen base; do
  for f in "$src/$dir"/*.c "$src/$dir"/*.h; do
    [ -e "$f" ] || continue
    while IFS= read -r inc; do
      found=""
      for d in $folders; do
        [ -e "$src/$d/$inc" ] && found="$found $d"
      done
      [ -n "$found" ] || continue # a system or generated header
      ok=""
      for d in ${may[$dir]}; do
        case " $found " in *" $d "*) ok=1 ;; esac
      done
      [ -n "$ok" ] || complain "$dir/${f##*/} includes \"$inc\" of${found}; $dir/ may use only: ${may[$dir]}"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done
done

# ---- 2. and 3. symbols ----
# The folder of an object (api.c.o, or an archive member api.c.o): where its
# source is; every source's name is unique across the folders.
folder_of() {
  local base=${1%.o} hits=""
  for d in cli check runtime gen base; do
    [ -e "$src/$d/$base" ] && hits="$hits $d"
  done
  set -- $hits
  [ $# -le 1 ] || complain "$base is in several folders:$hits"
  echo "${1:-}"
}
# "object defined|undefined symbol" lines of every object given.
table=$(mktemp)
trap 'rm -f "$table"' EXIT
objects=()
for a in "$@"; do
  if [ -d "$a" ]; then objects+=("$a"/*.o); else objects+=("$a"); fi
done
for o in "${objects[@]}"; do
  nm -A -P "$o" | while read -r where sym type _; do
    member=${where%:}
    if [[ $member =~ \[([^]]*)\]$ ]]; then member=${BASH_REMATCH[1]}; else member=${member##*/}; fi
    case $type in
      U) echo "$member U $sym" ;;
      [TDBRC]) echo "$member D $sym" ;;
    esac
  done
done > "$table"

declare -A owner
while read -r obj kind sym; do
  [ "$kind" = D ] && owner[$sym]=$(folder_of "$obj")
done < "$table"
declare -A edges
while read -r obj kind sym; do
  [ "$kind" = U ] || continue
  to=${owner[$sym]:-}
  [ -n "$to" ] || continue # outside the project (libc, CUDA, Lua)
  from=$(folder_of "$obj")
  [ -n "$from" ] || continue
  if [ "$from" != "$to" ]; then
    ok=""
    if [ "$from" = cli ]; then
      { [ "$to" = check ] || [[ $sym == attnbwd_* ]]; } && ok=1 # check/, or the public API
    else
      for d in ${may[$from]}; do [ "$d" = "$to" ] && ok=1; done
    fi
    [ -n "$ok" ] || complain "$from/${obj%.o} calls $sym of $to/"
  fi
  if [ "$from" = check ] && [ "$to" = check ]; then
    for o2 in $(awk -v s="$sym" '$2 == "D" && $3 == s {print $1}' "$table"); do
      [ "$o2" = "$obj" ] || edges["${obj%.o} ${o2%.o}"]=1
    done
  fi
done < "$table"

# Cycles among check/'s objects: repeatedly drop the objects nothing calls.
nodes=$(for e in "${!edges[@]}"; do echo "$e"; done | tr ' ' '\n' | sort -u)
while :; do
  dropped=""
  for n in $nodes; do
    called=""
    for e in "${!edges[@]}"; do [ "${e#* }" = "$n" ] && called=1 && break; done
    if [ -z "$called" ]; then
      dropped=1
      for e in "${!edges[@]}"; do [ "${e%% *}" = "$n" ] && unset "edges[$e]"; done
      nodes=$(echo "$nodes" | grep -vx "$n" || true)
    fi
  done
  [ -n "$dropped" ] || break
done
[ -z "$nodes" ] || complain "check/'s objects call each other in a cycle among: $(echo $nodes)"

[ "$fail" = 0 ] && echo "check_arrows: the arrows run one way"
exit "$fail"

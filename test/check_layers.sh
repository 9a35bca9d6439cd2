#!/usr/bin/env bash
# check_layers.sh: the layers of src/ are what docs/internals.md says.
#
# From the built objects (nm; run after the build, in the tree that was
# built): every symbol a file uses that another file of src/ defines
# belongs to a file of the same or a lower layer (the entry, fencing.c,
# may call only the *_init function of each layer); no data symbol is
# shared between files (a layer keeps its state and offers functions);
# from the sources: a file includes only its own layer's header or lower
# ones, and no function is called "run" or "look".  Every file of src/
# is in the table below.  Prints each violation; fails if there is one.
#
# What it cannot see (a review's business, not this script's): a macro or
# inline function of a header the file may not include but reached through
# another name, a call through a looked-up function pointer
# (load_external_function, OidFunctionCall, SPI), and a lower layer's
# function that hands out a pointer to its own state.
#
#   bash test/check_layers.sh          # after make
set -euo pipefail
cd "$(dirname "$0")/.."

# layer rank name header files: a file may use its own layer and those of
# a lower rank; two layers of one rank (resource, holder) use neither
# each other.  Rank 9 is the module entry.
layers='
1 base     fencing.h  catalog.c args.c guc_prefix.c stats.c
2 tokens   token.h    token.c
3 leases   lease.h    lease_table.c lease.c lease_admin.c lease_wait.c lease_arrival.c
4 resource resource.h fence.c guard.c claim.c
4 holder   holder.h   election.c watch.c
9 entry    -          fencing.c
'

declare -A rank_of layer_of
while read -r rank name header files; do
	[ -n "$rank" ] || continue
	for f in $header $files; do
		[ "$f" = - ] && continue
		rank_of[$f]=$rank
		layer_of[$f]=$name
	done
done <<<"$layers"

bad=0
violation() {
	echo "  $*"
	bad=$((bad + 1))
}

# may file A (layer/rank) use something of file B?
may_use() {
	local a=$1 b=$2
	[ "${layer_of[$a]}" = "${layer_of[$b]}" ] && return 0
	[ "${rank_of[$b]}" -lt "${rank_of[$a]}" ]
}

echo "== files in the layer table"
for f in src/*.c src/*.h; do
	f=${f#src/}
	[ -n "${layer_of[$f]:-}" ] || violation "src/$f is in no layer"
done

echo "== includes (a file includes its own layer's header or lower ones)"
for path in src/*.c src/*.h; do
	f=${path#src/}
	[ -n "${layer_of[$f]:-}" ] || continue
	[ "${layer_of[$f]}" = entry ] && continue
	for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$path"); do
		[ -e "src/$h" ] || continue	# PostgreSQL's
		if [ -z "${layer_of[$h]:-}" ]; then
			violation "src/$f includes $h, which is no layer's header"
		elif ! may_use "$f" "$h"; then
			violation "src/$f (${layer_of[$f]}) includes $h (${layer_of[$h]})"
		fi
	done
done

echo "== symbols (nm of the built objects)"
objs=$(ls src/*.o 2>/dev/null || true)
if [ -z "$objs" ]; then
	echo "  no src/*.o: build first (make)" >&2
	exit 2
fi
for path in src/*.c; do
	[ -f "${path%.c}.o" ] || violation "$path has no object: build first"
done
# symbol kind file: every symbol an object defines globally
declare -A def_file def_kind
while read -r file kind sym; do
	def_file[$sym]=$file
	def_kind[$sym]=$kind
done < <(nm -A --defined-only -g $objs |
	sed -n 's|^src/\([^:]*\)\.o:[0-9a-f]* \([A-Za-z]\) \(.*\)|\1.c \2 \3|p')

for o in $objs; do
	f=$(basename "$o" .o).c
	[ -n "${layer_of[$f]:-}" ] || continue
	for sym in $(nm -u "$o" | awk '{print $2}'); do
		g=${def_file[$sym]:-}
		[ -n "$g" ] || continue	# PostgreSQL's or libc's
		case ${def_kind[$sym]} in
		[DdBbCcGgSs])
			violation "src/$f uses $g's data symbol $sym"
			continue
			;;
		esac
		[ -n "${layer_of[$g]:-}" ] || continue	# reported above
		if [ "${layer_of[$f]}" = entry ]; then
			case $sym in
			*_init) ;;
			*) violation "src/$f (entry) calls $sym of src/$g: the entry calls only *_init" ;;
			esac
		elif ! may_use "$f" "$g"; then
			violation "src/$f (${layer_of[$f]}) calls $sym of src/$g (${layer_of[$g]})"
		fi
	done
done

echo "== names (no function is called run or look: say what it does)"
# from the sources: the compiler inlines static functions out of nm's view
for path in src/*.c; do
	for sym in $(sed -n 's/^\(run\|look\)(.*/\1/p' "$path"); do
		violation "${path} has a function named $sym"
	done
done

echo "layers: $bad violations"
[ "$bad" -eq 0 ]

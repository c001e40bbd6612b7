#!/usr/bin/env bash
# The fuzz tier: runs every fuzz target of the given packages for FUZZTIME on
# top of its committed seed corpus, one target at a time.
#
#   test/fuzz.sh OUTDIR PACKAGE...
#
# Each package with fuzz targets is built once, fuzz-instrumented
# (`go test -c -fuzz`), two packages at a time; its targets are the ones
# the binary lists (-test.list), and each runs from that binary in the
# package's directory, as `go test -fuzz` would run it, with the same
# cache of generated inputs. One `go test -fuzz` per target would load,
# check and link the package again for every target: about 1.5 s each, a
# third of a 3 s target's time.
#
# Each target's output goes to OUTDIR/fuzz-<package>-<target>.log. When a
# target fails, its failure is printed here. The input Go wrote to the
# package's testdata/fuzz/ is moved to OUTDIR/failing-inputs/: left in the
# source tree it would become a seed that fails every later unit run (and
# so every later `make test`) without saying where it came from. The
# message says how to put it back as a committed regression seed once the
# bug is fixed. Exits non-zero when any target failed.
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}
out=${1:?usage: test/fuzz.sh OUTDIR PACKAGE...}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/bin" && mkdir "$out/bin"
fuzzcache=$("$GO" env GOCACHE)/fuzz

# Packages whose test files declare a fuzz target (the binary says which
# exactly), as "importpath dir" lines.
pkgs=()
while read -r pkg dir; do
	if grep -q '^func Fuzz' "$dir"/*_test.go 2>/dev/null; then
		pkgs+=("$pkg $dir")
	fi
done < <("$GO" list -f '{{.ImportPath}} {{.Dir}}' "$@")

bin_of() { echo "$out/bin/$(echo "$1" | tr / _).test"; }

# build PACKAGE: the package's fuzz-instrumented test binary; the build log
# goes to OUTDIR/build-<package>.log.
build() {
	"$GO" test -c -fuzz=. -o "$(bin_of "$1")" "$1" >"$out/build-${1##*/}.log" 2>&1
}
export -f build bin_of
export GO out
printf '%s\n' "${pkgs[@]%% *}" | xargs -r -P 2 -I{} bash -c 'build {} || true'

run_target() { # PACKAGE DIR TARGET LOG
	(cd "$2" && "$(bin_of "$1")" -test.paniconexit0 -test.timeout=10m -test.run='^$' -test.fuzz="^$3\$" \
		-test.fuzztime="$FUZZTIME" -test.fuzzcachedir="$fuzzcache/$1") >"$4" 2>&1
}

# coordinator_race LOG: true when the target failed with nothing but the
# coordinator's own deadline error and wrote no failing input.
coordinator_race() {
	! grep -q 'Failing input written' "$1" &&
		[ "$(sed -n '/^--- FAIL/,/^FAIL$/p' "$1" | grep -v -e '^--- FAIL' -e '^FAIL$' -e '^ *context deadline exceeded$' -e '^ *$' | wc -l)" -eq 0 ] &&
		grep -q '^ *context deadline exceeded$' "$1"
}

targets=0
failed=()
for line in "${pkgs[@]}"; do
	pkg=${line%% *}
	dir=${line#* }
	bin=$(bin_of "$pkg")
	if [ ! -x "$bin" ]; then
		targets=$((targets + 1))
		failed+=("$pkg (build)")
		echo "FAIL $pkg: fuzz build failed (full output: $out/build-${pkg##*/}.log)"
		tail -40 "$out/build-${pkg##*/}.log" | sed 's/^/    /'
		continue
	fi
	if ! list=$(cd "$dir" && "$bin" -test.list='^Fuzz' 2>&1); then
		targets=$((targets + 1))
		failed+=("$pkg (list)")
		echo "FAIL $pkg: listing its fuzz targets failed:"
		echo "$list" | tail -40 | sed 's/^/    /'
		continue
	fi
	for f in $(echo "$list" | grep '^Fuzz'); do
		targets=$((targets + 1))
		log="$out/fuzz-${pkg##*/}-$f.log"
		start=$SECONDS
		if run_target "$pkg" "$dir" "$f" "$log"; then
			echo "ok   $pkg $f ($((SECONDS - start))s)"
			continue
		fi
		# Go 1.26's fuzz coordinator can fail a target with a bare
		# "context deadline exceeded" when -fuzztime ends while a worker
		# is mid-call, without any failing input (golang/go#75804, fixed
		# in Go 1.27). That is not a finding: say so and run the target
		# once more; a second failure of any kind counts.
		if coordinator_race "$log"; then
			echo "note $pkg $f: Go fuzz coordinator deadline race (golang/go#75804), no failing input; running it again"
			mv "$log" "$log.race"
			if run_target "$pkg" "$dir" "$f" "$log"; then
				echo "ok   $pkg $f ($((SECONDS - start))s, second run)"
				continue
			fi
		fi
		failed+=("$pkg $f")
		echo "FAIL $pkg $f ($((SECONDS - start))s; full output: $log)"
		if grep -q '^--- FAIL' "$log"; then
			sed -n '/^--- FAIL/,$p' "$log" | head -60 | sed 's/^/    /'
		else
			tail -40 "$log" | sed 's/^/    /'
		fi
		input=$(sed -n 's/^ *Failing input written to \(.*\)$/\1/p' "$log" | tail -1)
		if [ -z "$input" ] || [ ! -f "$dir/$input" ]; then
			continue
		fi
		if git -C "$dir" ls-files --error-unmatch "$input" >/dev/null 2>&1; then
			echo "    the failing input $dir/$input is a committed seed: left in place"
			continue
		fi
		saved="$out/failing-inputs/$pkg/$input"
		mkdir -p "$(dirname "$saved")"
		mv "$dir/$input" "$saved"
		rmdir "$dir/$(dirname "$input")" "$dir/testdata/fuzz" "$dir/testdata" 2>/dev/null
		name=$(basename "$input")
		echo "    failing input saved to $saved (moved out of $dir/testdata so that"
		echo "    unit runs do not trip over it); its content:"
		head -c 2000 "$saved" | sed 's/^/        /'
		echo
		echo "    to reproduce it, and once fixed to keep it as a regression seed (commit it):"
		echo "        mkdir -p $dir/$(dirname "$input") && cp $saved \$_ && $GO test -run='^$f/$name\$' $pkg"
	done
done
rm -rf "$out/bin"

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} of $targets targets failed: ${failed[*]}"
	exit 1
fi
echo "fuzz: $targets targets passed"

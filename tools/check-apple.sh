#!/usr/bin/env bash
# Type-checks and compiles the engine against Apple's real SDK, from any machine with a Swift 6
# toolchain: CHostKernels (clang), LucidEngine and LucidCABI (swiftc -c -O -wmo, arm64), and the
# Swift tests that do not need the Metal emulation. Nothing is linked or run.
#
#     APPLE_SDK=/path/to/iPhoneOS17.4.sdk bash tools/check-apple.sh
#
# Without an SDK it prints one line saying how to get one and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

sdk=${APPLE_SDK:-}
if [[ -z $sdk || ! -f $sdk/SDKSettings.json ]]; then
  echo "check-apple: skipped, no Apple SDK given: run 'make check-apple APPLE_SDK=<sdk>' with a macOS 14+ or iOS 17+ SDK (on a Mac: APPLE_SDK=\$(xcrun --show-sdk-path); elsewhere see docs/guide/metal.rst, 'Checking the Apple build')"
  exit 0
fi
sdk=$(cd "$sdk" && pwd)

swiftc=$(command -v swiftc)
toolchain_lib=$(cd "$(dirname "$(readlink -f "$swiftc")")/../lib" && pwd)
canonical=$(sed -n 's/.*"CanonicalName" *: *"\([^"]*\)".*/\1/p' "$sdk/SDKSettings.json" | head -n 1)
case $canonical in
  macosx*) target=arm64-apple-macos14.0; triple=arm64-apple-macos ;;
  iphoneos*) target=arm64-apple-ios17.0; triple=arm64-apple-ios ;;
  *) echo "check-apple: $sdk is a '$canonical' SDK; give a macOS or iOS one" >&2; exit 2 ;;
esac

out=.build/check-apple
rm -rf "$out/obj" "$out/modules"
mkdir -p "$out/obj" "$out/modules" "$out/resource"

# A resource dir with only the toolchain's shims and clang headers: a Linux toolchain's own
# dispatch and Foundation module maps clash with the SDK's. Its apinotes give the SDK's C `os`
# declarations the Swift names that the SDK's own os.swiftinterface uses.
ln -sfn "$toolchain_lib/swift/shims" "$out/resource/shims"
ln -sfn "$(readlink -f "$toolchain_lib/swift/clang")" "$out/resource/clang"
rm -rf "$out/resource/apinotes" && cp -R tools/apple/apinotes "$out/resource/apinotes"

# The module map SwiftPM would generate for the C target.
cat > "$out/modules/module.modulemap" <<EOF
module CHostKernels {
    header "$PWD/Sources/CHostKernels/include/host_kernels.h"
    export *
}
EOF

# Swift Testing is not in an SDK older than Xcode 16's: the tests are then checked against the
# toolchain's own Testing interface rebuilt for the target. Two declarations of it need a
# newer standard library than such an SDK has, and are relaxed for the type check.
if [[ ! -d $sdk/usr/lib/swift/Testing.swiftmodule && ! -d $sdk/../../Library/Frameworks/Testing.framework ]]; then
  iface=$(ls "$toolchain_lib"/swift/*/Testing.swiftmodule/*.swiftinterface 2>/dev/null | grep -v private | head -n 1 || true)
  if [[ -n $iface ]]; then
    mkdir -p "$out/modules/Testing.swiftmodule"
    sed -e "s/-target [^ ]*/-target $target/" -e 's/ -disable-objc-interop//' \
        -e 's/= #isolation/= nil/g' -e 's/\(public struct ExitTest : Swift.Sendable\), ~Swift.Copyable/\1/' \
        "$iface" > "$out/modules/Testing.swiftmodule/$triple.swiftinterface"
  fi
fi

common=(-target "$target" -sdk "$sdk" -resource-dir "$out/resource" -module-cache-path "$out/module-cache"
        -package-name lucid -swift-version 6 -I "$out/modules" -I "$out/obj"
        -plugin-path "$toolchain_lib/swift/host/plugins")

status=0
step() {  # step NAME COMMAND...: runs one compile, keeps its log, counts its errors
  local name=$1; shift
  local log="$out/$name.log"
  if "$@" >"$log" 2>&1; then
    echo "check-apple: $name: 0 errors"
  else
    status=1
    local errors
    errors=$(grep -c ' error: ' "$log" || true)
    if [[ $errors == 0 ]]; then
      echo "check-apple: $name: the compiler failed without an error line (a crash?); the end of $log:"
      tail -n 20 "$log"
    else
      echo "check-apple: $name: $errors errors (first ones below; all in $log)"
      grep -m 10 ' error: ' "$log"
    fi
  fi
}

clang_bin=$(dirname "$swiftc")/clang
step CHostKernels "$clang_bin" -target "$target" -isysroot "$sdk" -O2 -Wall -Werror \
  -I Sources/CHostKernels/include -c Sources/CHostKernels/host_kernels.c -o "$out/obj/CHostKernels.o"
step LucidEngine "$swiftc" "${common[@]}" -module-name LucidEngine -parse-as-library -enable-testing \
  -c -O -wmo -emit-module -emit-module-path "$out/obj/LucidEngine.swiftmodule" -o "$out/obj/LucidEngine.o" \
  $(find Sources/LucidEngine -name '*.swift' | sort)
step LucidCABI "$swiftc" "${common[@]}" -module-name LucidCABI -parse-as-library -enable-testing \
  -c -O -wmo -emit-module -emit-module-path "$out/obj/LucidCABI.swiftmodule" -o "$out/obj/LucidCABI.o" \
  $(find Sources/LucidCABI -name '*.swift' | sort)
step LucidEngineTests "$swiftc" "${common[@]}" -module-name LucidEngineTests -parse-as-library \
  -c -O -wmo -o "$out/obj/LucidEngineTests.o" \
  $(ls tests/swift/*.swift | grep -v MetalEmulation | sort)

echo "check-apple: $canonical SDK at $sdk, $("$swiftc" --version 2>&1 | head -n 1), target $target: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status

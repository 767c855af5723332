import Foundation
import Testing
@testable import LucidEngine

/// tests/data, beside this file's folder.
private let dataDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("data")

/// A fresh path in a directory of its own.
private func temporaryPath(_ name: String) throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lucid-ckpt-\(UInt64.random(in: 0..<UInt64.max))")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir.appendingPathComponent(name).path
}

/// A tensor's bytes as the engine stores them.
private func rawBytes(_ t: Tensor) throws -> [UInt8] {
    var out = [UInt8](repeating: 0, count: t.numel * t.dtype.itemSize)
    try out.withUnsafeMutableBytes { try Conversion.toHost(t.impl, $0) }
    return out
}

private func tensor(bytes: [UInt8], shape: [Int], dtype: DType, device: Device = .cpu) throws -> Tensor {
    Tensor(try bytes.withUnsafeBytes { try Conversion.fromHost($0, shape: shape, dtype: dtype, device: device) })
}

private func littleEndian<T: FixedWidthInteger>(_ values: [T]) -> [UInt8] {
    values.flatMap { v in (0..<MemoryLayout<T>.size).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
}

/// One tensor of every dtype lucid holds, with values that exercise its bits (signs, NaN
/// payloads, subnormals, the extremes of the integer types), and an empty and a 0-d one.
private func everyDType() throws -> [String: Tensor] {
    [
        "f32": try tensor(
            bytes: littleEndian([Float(1.5).bitPattern, Float.nan.bitPattern | 7, Float.leastNonzeroMagnitude.bitPattern, 0x8000_0000]),
            shape: [2, 2], dtype: .float32),
        "f16": try tensor(bytes: littleEndian([UInt16(0x3C00), 0x7E01, 0x0001, 0xFBFF, 0x8000]), shape: [5], dtype: .float16),
        "bf16": try tensor(bytes: littleEndian([UInt16(0x3FC0), 0x7FC1, 0x0001, 0xFF7F, 0x8000, 0x4049]), shape: [3, 2], dtype: .bfloat16),
        "f64": try tensor(
            bytes: littleEndian([(1.0 / 3).bitPattern, Double.nan.bitPattern | 3, Double.leastNonzeroMagnitude.bitPattern]), shape: [3],
            dtype: .float64),
        "i64": try tensor(bytes: littleEndian([Int64.min, -1, Int64.max]), shape: [3], dtype: .int64),
        "i32": try tensor(bytes: littleEndian([Int32.min, 0, Int32.max]), shape: [1, 3], dtype: .int32),
        "i16": try tensor(bytes: littleEndian([Int16.min, -2, Int16.max]), shape: [3], dtype: .int16),
        "i8": try tensor(bytes: littleEndian([Int8.min, -1, Int8.max]), shape: [3], dtype: .int8),
        "u8": try tensor(bytes: [0, 128, 255], shape: [3], dtype: .uint8),
        "bool": try tensor(bytes: [1, 0, 1, 1], shape: [2, 2], dtype: .bool),
        "empty": try Tensor.zeros([0, 3]),
        "scalar": try Tensor.full([], 2.5, dtype: .float64),
    ]
}

@Suite struct CheckpointTests {
    @Test func everyDTypeRoundTripsBitForBit() throws {
        let tensors = try everyDType()
        let path = try temporaryPath("all.safetensors")
        try saveSafetensors(tensors, to: path, metadata: ["format": "pt", "note": "quote \" backslash \\ tab \t ü"])
        try checkLoaded(try loadSafetensors(path), tensors, .cpu)
        // "metal" holds no float64: a file with some is refused naming the first such tensor,
        // before any tensor is made; the rest load there.
        let onMetal = lucidError { _ = try loadSafetensors(path, device: .metal) }
        #expect(onMetal?.kind == .type && onMetal?.message.hasPrefix("loadSafetensors: tensor 'f64': 'metal' does not support float64") == true)
        let held = tensors.filter { $0.value.dtype != .float64 }
        let heldPath = try temporaryPath("held.safetensors")
        try saveSafetensors(held, to: heldPath)
        try checkLoaded(try loadSafetensors(heldPath, device: .metal), held, .metal)
        #expect(try loadSafetensorsMetadata(path) == ["format": "pt", "note": "quote \" backslash \\ tab \t ü"])
    }

    private func checkLoaded(_ back: [String: Tensor], _ tensors: [String: Tensor], _ device: Device) throws {
        #expect(Set(back.keys) == Set(tensors.keys))
        for (name, t) in tensors {
            let b = try #require(back[name])
            #expect(b.dtype == t.dtype && b.shape == t.shape && b.device == device, "\(name)")
            #expect(try rawBytes(b) == rawBytes(t), "\(name)")
            #expect(!b.requiresGrad)
        }
    }

    @Test func theFileIsLaidOutAsTheFormatSays() throws {
        let path = try temporaryPath("layout.safetensors")
        try saveSafetensors(try everyDType(), to: path)
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let n = data[0..<8].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
        #expect(n % 8 == 0)  // so that the data starts 8-byte aligned
        let header = try #require(try JSONSerialization.jsonObject(with: Data(data[8..<(8 + n)])) as? [String: Any])
        #expect(header["__metadata__"] == nil)  // none given, none written
        var ranges: [(String, Int, Int, Int)] = []
        let sizes = ["F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1]
        for (name, value) in header {
            let e = try #require(value as? [String: Any])
            let offsets = try #require(e["data_offsets"] as? [Int])
            let shape = try #require(e["shape"] as? [Int])
            let dtype = try #require(e["dtype"] as? String)
            let size = try #require(sizes[dtype])
            #expect(offsets[1] - offsets[0] == shape.reduce(1, *) * size, "\(name)")
            ranges.append((name, offsets[0], offsets[1], size))
        }
        ranges.sort { ($0.1, $0.2) < ($1.1, $1.2) }
        var at = 0
        for r in ranges {
            #expect(r.1 == at)  // packed without gaps
            #expect(r.1 % r.3 == 0, "\(r.0) is aligned")  // larger elements first
            at = r.2
        }
        #expect(8 + n + at == data.count)
        #expect(ranges.first!.3 == 8 && ranges.last!.3 == 1)
    }

    @Test func everyHostileFileIsRefusedWithAPreciseError() throws {
        let url = dataDirectory.appendingPathComponent("safetensors_hostile.json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let cases = try #require(doc["cases"] as? [[String: Any]])
        #expect(cases.count >= 40)
        func bytes(_ segments: Any?) throws -> [UInt8] {
            var out: [UInt8] = []
            for s in try #require(segments as? [[String: Any]]) {
                if let text = s["text"] as? String {
                    for _ in 0..<((s["repeat"] as? Int) ?? 1) { out += Array(text.utf8) }
                } else if let hex = s["hex"] as? String {
                    let digits = Array(hex.utf8)
                    for i in stride(from: 0, to: digits.count, by: 2) {
                        out.append(UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16)!)
                    }
                } else {
                    out += [UInt8](repeating: 0, count: try #require(s["zeros"] as? Int))
                }
            }
            return out
        }
        let path = try temporaryPath("hostile.safetensors")
        var refused = 0
        for c in cases {
            let name = try #require(c["name"] as? String), expect = try #require(c["expect"] as? String)
            var file: [UInt8]
            if c["raw"] != nil {
                file = try bytes(c["raw"])
            } else {
                let header = try bytes(c["header"])
                file = littleEndian([UInt64(header.count)]) + header + (try bytes(c["body"]))
            }
            try Data(file).write(to: URL(fileURLWithPath: path))
            if c["layer"] as? String == "structure" {
                // Valid safetensors: Python refuses its lucid.structure metadata, which Swift ignores.
                _ = try loadSafetensors(path)
                continue
            }
            let error = lucidError { _ = try loadSafetensors(path, device: .metal) }
            #expect(error?.kind == .value, "\(name)")
            #expect(error?.message.hasPrefix("loadSafetensors: ") == true, "\(name): \(error?.message ?? "no error")")
            #expect(error?.message.contains(expect) == true, "\(name): \(error?.message ?? "no error") lacks '\(expect)'")
            #expect(lucidError { _ = try loadSafetensorsMetadata(path) }?.kind == .value, "\(name)")
            refused += 1
        }
        #expect(refused >= 40)
    }

    @Test func aCheckpointWrittenByPythonLoadsBitForBitAndIsWrittenBackIdentically() throws {
        // tests/data/python_state_dict.safetensors is lucid.save(state) of test_checkpoint_abi.py's
        // fixture_state(); that test checks that lucid.save still writes exactly these bytes.
        let url = dataDirectory.appendingPathComponent("python_state_dict.safetensors")
        let state = try loadSafetensors(url.path)
        let expected: [String: (DType, [Int], [Float])] = [
            "0.weight": (.float32, [3, 2], [-0.5, -0.25, 0, 0.25, 0.5, 0.75]),
            "0.bias": (.float32, [3], [0.5, -1, 2]),
            "1.weight": (.bfloat16, [1, 3], [1.5, -2.25, 3]),
            "1.bias": (.float16, [1], [0.125]),
            "2.num_batches_tracked": (.int64, [], [7]),
            "2.mask": (.bool, [3], [1, 0, 1]),
            "3.f64": (.float64, [2], [0.25, -8]),
            "3.i32": (.int32, [2], [-3, 4]),
            "3.i16": (.int16, [2], [-300, 300]),
            "3.i8": (.int8, [2], [-128, 127]),
            "3.u8": (.uint8, [2], [0, 255]),
        ]
        #expect(Set(state.keys) == Set(expected.keys))
        for (name, (dtype, shape, values)) in expected {
            let t = try #require(state[name])
            #expect(t.dtype == dtype && t.shape == shape, "\(name)")
            #expect(try t.toArray() == values, "\(name)")
        }
        // The same tensors and metadata written from Swift give the same file, byte for byte.
        let metadata = try loadSafetensorsMetadata(url.path)
        #expect(metadata.keys.contains("lucid.structure"))
        let path = try temporaryPath("again.safetensors")
        try saveSafetensors(state, to: path, metadata: metadata)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(contentsOf: url))
    }

    @Test func unsignedTypesLoadWidenedAndForeignTypesAreRefused() throws {
        let header = #"{"a":{"dtype":"U32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U16","shape":[2],"data_offsets":[8,12]}}"#
        let file = littleEndian([UInt64(header.utf8.count)]) + Array(header.utf8) + littleEndian([UInt32.max, 1]) + littleEndian([UInt16.max, 2])
        let path = try temporaryPath("unsigned.safetensors")
        try Data(file).write(to: URL(fileURLWithPath: path))
        let state = try loadSafetensors(path)
        #expect(state["a"]?.dtype == .int64 && state["b"]?.dtype == .int32)
        #expect(try rawBytes(state["a"]!) == littleEndian([Int64(UInt32.max), 1]))
        #expect(try state["b"]!.toArray() == [65535, 2])
    }

    @Test func savingRefusesWhatTheFormatCannotHoldAndKeepsThePreviousFile() throws {
        let path = try temporaryPath("keep.safetensors")
        try saveSafetensors(["w": try Tensor.ones([2])], to: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let bad = lucidError { try saveSafetensors(["__metadata__": try Tensor.ones([1])], to: path) }
        #expect(bad?.kind == .value && bad?.message.hasPrefix("saveSafetensors: ") == true)
        #expect(lucidError { try saveSafetensors(["a\u{0}b": try Tensor.ones([1])], to: path) }?.message.contains("NUL") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let dir = (path as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["keep.safetensors"])  // no temporary left
        let missing = lucidError { try saveSafetensors(["w": try Tensor.ones([1])], to: dir + "/nope/x.safetensors") }
        #expect(missing?.kind == .runtime && missing?.message.contains("nope/x.safetensors") == true)
        #expect(lucidError { _ = try loadSafetensors(dir + "/missing.safetensors") }?.kind == .runtime)
        #expect(lucidError { _ = try loadSafetensors(dir) }?.message.contains("is a directory") == true)
        #expect(lucidError { _ = try loadSafetensors("/dev/zero") }?.message.contains("is not a regular file") == true)
        // A tensor that requires gradients is saved as its values; a view as its elements.
        let p = try Tensor([1, 2, 3, 4, 5, 6], shape: [2, 3]).requiringGrad()
        try saveSafetensors(["p": p, "t": try p.detach().transpose(0, 1)], to: path)
        let back = try loadSafetensors(path)
        #expect(try back["t"]!.toArray() == [1, 4, 2, 5, 3, 6] && back["t"]!.shape == [3, 2])
        #expect(try back["p"]!.toArray() == [1, 2, 3, 4, 5, 6] && !back["p"]!.requiresGrad)
    }
}

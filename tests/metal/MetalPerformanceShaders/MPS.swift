// An emulation of the part of Metal Performance Shaders that lucid's Metal backend uses
// (matrix multiplication), for the check build on Linux. Declarations follow the Apple
// documentation pages named beside them; encode(...) records a command that runs when the
// command buffer commits, in float32 arithmetic. The checks follow the MPS headers: rowBytes a
// multiple of the element size and at least a row, every matrix inside its buffer, matching
// shapes, one data type for all three matrices (MPS multiplies float32 or float16), aligned
// offsets. A violation stops the process: it is a bug in the backend.

import Metal

private func mpsMisuse(_ message: String) -> Never {
    fatalError("Metal Performance Shaders emulation: \(message)")
}

// documentation/metalperformanceshaders/mpsdatatype
public enum MPSDataType: UInt32, Sendable {
    case invalid = 0
    case float32 = 0x1000_0020
    case float16 = 0x1000_0010
    case bFloat16 = 0x9000_0010

    var size: Int {
        switch self {
        case .float32: return 4
        case .float16, .bFloat16: return 2
        case .invalid: return 0
        }
    }
}

// documentation/metalperformanceshaders/mpssupportsmtldevice(_:)
public func MPSSupportsMTLDevice(_ device: (any MTLDevice)?) -> Bool { device != nil }

// documentation/metalperformanceshaders/mpsmatrixdescriptor
public final class MPSMatrixDescriptor {
    public var rows: Int
    public var columns: Int
    public var matrices: Int
    public var rowBytes: Int
    public var matrixBytes: Int
    public var dataType: MPSDataType

    // documentation/metalperformanceshaders/mpsmatrixdescriptor/init(rows:columns:matrices:rowbytes:matrixbytes:datatype:)
    public init(rows: Int, columns: Int, matrices: Int, rowBytes: Int, matrixBytes: Int, dataType: MPSDataType) {
        (self.rows, self.columns, self.matrices, self.rowBytes, self.matrixBytes, self.dataType) =
            (rows, columns, matrices, rowBytes, matrixBytes, dataType)
        let size = dataType.size
        if size == 0 { mpsMisuse("descriptor with an invalid data type") }
        if rowBytes % size != 0 || rowBytes < columns * size {
            mpsMisuse("rowBytes \(rowBytes) must be a multiple of \(size) and at least \(columns) columns × \(size)")
        }
        if matrices > 1 && (matrixBytes % rowBytes != 0 || matrixBytes < rows * rowBytes) {
            mpsMisuse("matrixBytes \(matrixBytes) must be a multiple of rowBytes (\(rowBytes)) and at least rows × rowBytes")
        }
    }

    // documentation/metalperformanceshaders/mpsmatrixdescriptor/init(rows:columns:rowbytes:datatype:)
    public convenience init(rows: Int, columns: Int, rowBytes: Int, dataType: MPSDataType) {
        self.init(rows: rows, columns: columns, matrices: 1, rowBytes: rowBytes, matrixBytes: rows * rowBytes, dataType: dataType)
    }

    // documentation/metalperformanceshaders/mpsmatrixdescriptor/rowbytes(forcolumns:datatype:)
    public class func rowBytes(forColumns columns: Int, dataType: MPSDataType) -> Int {
        // A recommended stride: a row padded to 16 bytes.
        (columns * dataType.size + 15) / 16 * 16
    }
}

// documentation/metalperformanceshaders/mpsmatrix
public final class MPSMatrix {
    public let data: any MTLBuffer
    public let offset: Int
    public var rows: Int { descriptor.rows }
    public var columns: Int { descriptor.columns }
    public var dataType: MPSDataType { descriptor.dataType }
    let descriptor: MPSMatrixDescriptor

    // documentation/metalperformanceshaders/mpsmatrix/init(buffer:offset:descriptor:)
    public init(buffer: any MTLBuffer, offset: Int, descriptor: MPSMatrixDescriptor) {
        data = buffer
        self.offset = offset
        self.descriptor = descriptor
        let d = descriptor
        let needed = offset + (d.matrices - 1) * d.matrixBytes + (d.rows - 1) * d.rowBytes + d.columns * d.dataType.size
        if offset < 0 || offset % d.dataType.size != 0 { mpsMisuse("offset \(offset) is not a multiple of the element size") }
        if d.rows > 0 && d.columns > 0 && needed > buffer.length {
            mpsMisuse("a \(d.matrices)×\(d.rows)×\(d.columns) matrix at offset \(offset) needs \(needed) bytes; the buffer has \(buffer.length)")
        }
    }

    // documentation/metalperformanceshaders/mpsmatrix/init(buffer:descriptor:)
    public convenience init(buffer: any MTLBuffer, descriptor: MPSMatrixDescriptor) {
        self.init(buffer: buffer, offset: 0, descriptor: descriptor)
    }

    func element(_ p: UnsafeMutableRawPointer, _ batch: Int, _ i: Int, _ j: Int) -> UnsafeMutableRawPointer {
        p + offset + batch * descriptor.matrixBytes + i * descriptor.rowBytes + j * descriptor.dataType.size
    }
}

// documentation/metalperformanceshaders/mpsmatrixmultiplication
public final class MPSMatrixMultiplication {
    let transposeLeft: Bool, transposeRight: Bool
    let resultRows: Int, resultColumns: Int, interiorColumns: Int
    let alpha: Double, beta: Double
    // documentation/metalperformanceshaders/mpsmatrixmultiplication/batchstart
    public var batchStart: Int = 0
    // documentation/metalperformanceshaders/mpsmatrixmultiplication/batchsize
    public var batchSize: Int = Int.max

    // documentation/metalperformanceshaders/mpsmatrixmultiplication/init(device:transposeleft:transposeright:resultrows:resultcolumns:interiorcolumns:alpha:beta:)
    public init(
        device: any MTLDevice, transposeLeft: Bool, transposeRight: Bool, resultRows: Int, resultColumns: Int,
        interiorColumns: Int, alpha: Double, beta: Double
    ) {
        (self.transposeLeft, self.transposeRight) = (transposeLeft, transposeRight)
        (self.resultRows, self.resultColumns, self.interiorColumns) = (resultRows, resultColumns, interiorColumns)
        (self.alpha, self.beta) = (alpha, beta)
    }

    // documentation/metalperformanceshaders/mpsmatrixmultiplication/encode(commandbuffer:leftmatrix:rightmatrix:resultmatrix:)
    public func encode(
        commandBuffer: any MTLCommandBuffer, leftMatrix: MPSMatrix, rightMatrix: MPSMatrix,
        resultMatrix: MPSMatrix
    ) {
        guard let cb = commandBuffer as? EmulatedCommandBuffer else { mpsMisuse("a command buffer from another device") }
        let types = [leftMatrix.dataType, rightMatrix.dataType, resultMatrix.dataType]
        if Set(types.map(\.rawValue)).count != 1 || !(types[0] == .float32 || types[0] == .float16) {
            mpsMisuse("matrix multiplication of \(types): all three must be float32, or all float16")
        }
        let (lr, lc) = transposeLeft ? (leftMatrix.columns, leftMatrix.rows) : (leftMatrix.rows, leftMatrix.columns)
        let (rr, rc) = transposeRight ? (rightMatrix.columns, rightMatrix.rows) : (rightMatrix.rows, rightMatrix.columns)
        if lr < resultRows || lc < interiorColumns || rr < interiorColumns || rc < resultColumns
            || resultMatrix.rows < resultRows || resultMatrix.columns < resultColumns
        {
            mpsMisuse(
                "shapes do not fit: left "
                    + "\(lr)×\(lc), right \(rr)×\(rc), result \(resultMatrix.rows)×\(resultMatrix.columns) for "
                    + "\(resultRows)×\(interiorColumns)·\(interiorColumns)×\(resultColumns)"
            )
        }
        let available = [leftMatrix, rightMatrix, resultMatrix].map(\.descriptor.matrices).min() ?? 0
        let count = min(batchSize, available - batchStart)
        if batchStart < 0 || count <= 0 { mpsMisuse("batch \(batchStart)..<\(batchStart + batchSize) outside the \(available) matrices") }
        cb.record(
            Product(op: self, left: leftMatrix, right: rightMatrix, result: resultMatrix, first: batchStart, count: count),
            writes: [resultMatrix.data])
    }

    struct Product: EmulatedCommand {
        let op: MPSMatrixMultiplication
        let left: MPSMatrix, right: MPSMatrix, result: MPSMatrix
        let first: Int, count: Int

        func load(_ m: MPSMatrix, _ base: UnsafeMutableRawPointer, _ b: Int, _ i: Int, _ j: Int) -> Float {
            let p = m.element(base, b, i, j)
            return m.dataType == .float32 ? p.load(as: Float.self) : Float(p.load(as: Float16.self))
        }

        func run() throws {
            let l = emulatedContents(left.data), r = emulatedContents(right.data), c = emulatedContents(result.data)
            for b in first..<(first + count) {
                for i in 0..<op.resultRows {
                    for j in 0..<op.resultColumns {
                        var acc: Float = 0
                        for k in 0..<op.interiorColumns {
                            let x = op.transposeLeft ? load(left, l, b, k, i) : load(left, l, b, i, k)
                            let y = op.transposeRight ? load(right, r, b, j, k) : load(right, r, b, k, j)
                            acc += x * y
                        }
                        var value = Float(op.alpha) * acc
                        if op.beta != 0 { value += Float(op.beta) * load(result, c, b, i, j) }
                        let p = result.element(c, b, i, j)
                        if result.dataType == .float32 {
                            p.storeBytes(of: value, as: Float.self)
                        } else {
                            p.storeBytes(of: Float16(value), as: Float16.self)
                        }
                    }
                }
            }
        }
    }
}

/// The GPU stream's availability.
public enum Metal {
    /// True when Metal kernels serve the "metal" device; false where the host fallback serves
    /// it (Linux, CI, and any machine without Metal).
    public static var isAvailable: Bool { Backends.metalIsAvailable }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The special functions of the elementwise kernels, in double precision: every dtype computes
/// them in `Double` and rounds once into its own. Series near the origin and asymptotic
/// expansions far from it, each used where its terms fall below double precision quickly.
enum SpecialMath {
    static let eulerGamma = 0.577_215_664_901_532_860_6
    static let sqrtPi = 1.772_453_850_905_516_027_3
    static let sqrt2 = 1.414_213_562_373_095_048_8
    static let ln2 = 0.693_147_180_559_945_309_4
    static let ln10 = 2.302_585_092_994_045_684_0

    // ---- error function family --------------------------------------------------------------

    static func erf(_ x: Double) -> Double { cErf(x) }
    static func erfc(_ x: Double) -> Double { cErfc(x) }

    /// erfinv by Newton's method on erf from a starting point that is good to a few digits:
    /// the central logarithmic approximation sqrt(-t/2 ... ) with t = log(1 - y²).
    static func erfinv(_ y: Double) -> Double {
        if y.isNaN || y < -1 || y > 1 { return .nan }
        if y == 1 { return .infinity }
        if y == -1 { return -.infinity }
        if y == 0 { return y }
        let a = abs(y)
        // Winitzki's closed form (relative error about 2e-3) as the starting point.
        let k = 0.147, l = cLog1p(-a * a)
        let p = 2 / (Double.pi * k) + l / 2
        var x = (p * p - l / k).squareRoot() - p
        x = x.squareRoot()
        // Newton steps; in the tail the residual is taken through erfc to keep its digits.
        for _ in 0..<4 {
            let r = a > 0.5 ? (1 - a) - erfc(x) : erf(x) - a
            let d = 2 / sqrtPi * cExp(-x * x)
            guard d > 0 else { break }
            x -= r / d
        }
        return y < 0 ? -x : x
    }

    /// exp(x²)·erfc(x): directly where neither factor leaves double's range, by Laplace's
    /// continued fraction beyond.
    static func erfcx(_ x: Double) -> Double {
        if x.isNaN { return x }
        if x < 0 {
            if x < -26.7 { return .infinity }
            return 2 * cExp(x * x) - erfcx(-x)
        }
        if x < 5 { return cExp(x * x) * erfc(x) }
        if x.isInfinite { return 0 }
        // erfc(x) = exp(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), from the back.
        var f = x
        for n in stride(from: 60, through: 1, by: -1) { f = x + (Double(n) / 2) / f }
        return 1 / (sqrtPi * f)
    }

    /// Φ(x) = erfc(-x/√2)/2, the standard normal distribution function.
    static func ndtr(_ x: Double) -> Double { 0.5 * erfc(-x / sqrt2) }

    /// log Φ(x): through erfcx in the lower tail, where Φ itself underflows.
    static func logNdtr(_ x: Double) -> Double {
        if x.isNaN { return x }
        if x > 0 { return cLog1p(-0.5 * erfc(x / sqrt2)) }
        return cLog(0.5 * erfcx(-x / sqrt2)) - 0.5 * x * x
    }

    /// The normal quantile: Newton's method on Φ (or 1 - Φ above ½, by symmetry) from the
    /// tail's asymptotic form or erfinv's.
    static func ndtri(_ p: Double) -> Double {
        if p.isNaN || p < 0 || p > 1 { return .nan }
        if p == 0 { return -.infinity }
        if p == 1 { return .infinity }
        if p > 0.5 { return -ndtri(1 - p) }
        var x: Double
        if p > 1e-3 {
            x = -sqrt2 * erfinv(1 - 2 * p)
        } else {
            let t = -2 * cLog(p)
            x = -(t - cLog(t) - cLog(2 * Double.pi)).squareRoot()
        }
        for _ in 0..<8 {
            // The step in relative terms, log Φ(x) - log p, keeps the tail's precision.
            let lf = logNdtr(x)
            let ratio = (2 / Double.pi).squareRoot() / erfcx(-x / sqrt2)  // φ(x)/Φ(x)
            let step = (lf - cLog(p)) / ratio
            x -= step
            if abs(step) <= 1e-15 * abs(x) { break }
        }
        return x
    }

    // ---- gamma family -------------------------------------------------------------------------

    static func lgamma(_ x: Double) -> Double { cLgamma(x) }

    /// ψ(x): reflection below ½, the recurrence ψ(x) = ψ(x + 1) - 1/x up to 10, then the
    /// asymptotic series in 1/x².
    static func digamma(_ x: Double) -> Double {
        if x.isNaN || x == -.infinity { return .nan }
        if x == .infinity { return x }
        if x == 0 { return x.sign == .minus ? .infinity : -.infinity }
        if x < 0 && x == x.rounded(.down) { return .nan }
        if x < 0.5 {
            return digamma(1 - x) - Double.pi / cTan(Double.pi * x)
        }
        var v = x, acc = 0.0
        while v < 10 { acc -= 1 / v; v += 1 }
        let r = 1 / (v * v)
        // B_2k / (2k) for k = 1..7.
        let series =
            r
            * (1.0 / 12 - r
                * (1.0 / 120 - r
                    * (1.0 / 252 - r
                        * (1.0 / 240 - r
                            * (1.0 / 132
                                - r * (691.0 / 32760 - r / 12))))))
        return acc + cLog(v) - 0.5 / v - series
    }

    /// ψ'(x), the trigamma function: reflection below ½, the recurrence up to 10, then the
    /// asymptotic series.
    static func trigamma(_ x: Double) -> Double {
        if x.isNaN || x == -.infinity { return .nan }
        if x == .infinity { return 0 }
        if x <= 0 && x == x.rounded(.down) { return .infinity }
        if x < 0.5 {
            let s = cSin(Double.pi * x)
            return -trigamma(1 - x) + Double.pi * Double.pi / (s * s)
        }
        var v = x, acc = 0.0
        while v < 10 { acc += 1 / (v * v); v += 1 }
        let r = 1 / (v * v)
        // 1/v + 1/(2v²) + Σ B_2k / v^(2k+1).
        let series =
            (1 + r
                * (1.0 / 6 - r
                    * (1.0 / 30 - r
                        * (1.0 / 42 - r
                            * (1.0 / 30 - r
                                * (5.0 / 66
                                    - r * (691.0 / 2730 - r * 7.0 / 6)))))))
            / v
        return acc + 0.5 * r + series
    }

    /// The Hurwitz zeta function Σ_k (k + q)^-s (s > 1), by Euler–Maclaurin summation: the
    /// first terms directly, the tail as an integral with Bernoulli corrections. For q ≤ 0 the
    /// sum exists only for integer s (and is infinite at integer q).
    static func zeta(_ s: Double, _ q: Double) -> Double {
        if s.isNaN || q.isNaN { return .nan }
        if s == 1 { return .infinity }
        if s < 1 { return .nan }
        if q <= 0 {
            if q == q.rounded(.down) { return .infinity }
            if s != s.rounded(.down) { return .nan }
        }
        if q.isInfinite { return 0 }
        if q < -1e6 { return .nan }
        // The first terms directly, until the rest starts at 9 or more.
        var sum = 0.0
        var a = q
        while a < 9 {
            sum += cPow(a, -s)
            a += 1
        }
        // a = q + n: the tail ∫ + ½ f(a) + Σ B_2k/(2k)! f^(2k-1)(a).
        let w = a
        sum += cPow(w, 1 - s) / (s - 1) + 0.5 * cPow(w, -s)
        // Σ_k B_2k/(2k)! · s(s+1)…(s+2k-2) · w^(-s-2k+1)
        let bernoulli: [Double] = [
            1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
            -3617.0 / 510, 43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730,
        ]
        var factor = s  // the rising product s(s+1)…(s+2k-2), over (2k)!
        var power = cPow(w, -s - 1)
        var fact = 2.0
        for (k, b) in bernoulli.enumerated() {
            let term = b / fact * factor * power
            sum += term
            if abs(term) < 1e-17 * abs(sum) { break }
            let m = Double(2 * k + 2)
            factor *= (s + m - 1) * (s + m)
            fact *= (m + 1) * (m + 2)
            power /= w * w
        }
        return sum
    }

    /// The regularized lower incomplete gamma P(a, x).
    static func igamma(_ a: Double, _ x: Double) -> Double {
        if a.isNaN || x.isNaN || a < 0 || x < 0 { return .nan }
        if a == 0 { return x > 0 ? 1 : .nan }
        if x == 0 { return 0 }
        if a.isInfinite { return x.isInfinite ? .nan : 0 }
        if x.isInfinite { return 1 }
        if x < a + 1 { return gammaSeries(a, x) }
        return 1 - gammaFraction(a, x)
    }

    /// The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x).
    static func igammac(_ a: Double, _ x: Double) -> Double {
        if a.isNaN || x.isNaN || a < 0 || x < 0 { return .nan }
        if a == 0 { return x > 0 ? 0 : .nan }
        if x == 0 { return 1 }
        if a.isInfinite { return x.isInfinite ? .nan : 1 }
        if x.isInfinite { return 0 }
        if x < a + 1 { return 1 - gammaSeries(a, x) }
        return gammaFraction(a, x)
    }

    /// x^a e^-x / Γ(a), in logarithms.
    private static func gammaPrefactor(_ a: Double, _ x: Double) -> Double {
        cExp(a * cLog(x) - x - lgamma(a))
    }

    /// P(a, x) = x^a e^-x / Γ(a+1) · Σ x^n / ((a+1)…(a+n)), for x < a + 1.
    private static func gammaSeries(_ a: Double, _ x: Double) -> Double {
        var term = 1 / a, sum = term, ap = a
        for _ in 0..<1000 {
            ap += 1
            term *= x / ap
            sum += term
            if abs(term) < abs(sum) * 1e-17 { break }
        }
        return sum * gammaPrefactor(a, x)
    }

    /// Q(a, x) by its continued fraction (modified Lentz), for x ≥ a + 1.
    private static func gammaFraction(_ a: Double, _ x: Double) -> Double {
        let tiny = 1e-300
        var b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d
        for i in 1...1000 {
            let an = -Double(i) * (Double(i) - a)
            b += 2
            d = an * d + b
            if abs(d) < tiny { d = tiny }
            c = b + an / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            let delta = d * c
            h *= delta
            if abs(delta - 1) < 1e-16 { break }
        }
        return gammaPrefactor(a, x) * h
    }

    // ---- Bessel functions ---------------------------------------------------------------------

    /// The coefficients a_k(ν) = Π_{j=1..k} (4ν² - (2j-1)²) / (k! 8^k) of the large-argument
    /// expansions, summed as Σ sign^k a_k / x^k until the terms stop shrinking.
    private static func asymptotic(
        order nu: Double, _ x: Double, alternating: Bool, from start: Int = 0,
        step: Int = 1
    ) -> Double {
        let mu = 4 * nu * nu
        var a = 1.0, sum = 0.0, last = Double.infinity
        for k in 0..<60 {
            if k > 0 {
                let j = Double(2 * k - 1)
                a *= (mu - j * j) / (Double(k) * 8 * x)
            }
            if k >= start && (k - start) % step == 0 {
                let t = alternating && ((k - start) / step) % 2 == 1 ? -a : a
                if abs(t) > last { break }
                sum += t
                last = abs(t)
                if abs(t) < 1e-17 * abs(sum) { break }
            }
        }
        return sum
    }

    /// Σ_k (x²/4)^k / (k! (k+n)!) · sign^k · (x/2)^n, with the digamma weights of the second
    /// kind's series when `weighted` (ψ(k+1) + ψ(k+n+1)).
    private static func powerSeries(_ x: Double, order n: Int, alternating: Bool, weighted: Bool) -> Double {
        let q = x * x / 4
        var term = n == 0 ? 1.0 : x / 2  // (x/2)^n / n!
        var psiA = -eulerGamma, psiB = -eulerGamma + (n == 1 ? 1 : 0)  // ψ(1), ψ(n+1)
        var sum = weighted ? term * (psiA + psiB) : term
        for k in 1..<500 {
            let kd = Double(k)
            term *= (alternating ? -q : q) / (kd * (kd + Double(n)))
            psiA += 1 / kd
            psiB += 1 / (kd + Double(n))
            let t = weighted ? term * (psiA + psiB) : term
            sum += t
            if abs(t) < 1e-17 * abs(sum) && kd > q.squareRoot() { break }
        }
        return sum
    }

    /// J_n (n = 0, 1): the power series to 12, Hankel's expansion beyond.
    static func besselJ(_ n: Int, _ x: Double) -> Double {
        if x.isNaN { return x }
        if x < 0 { return n == 0 ? besselJ(0, -x) : -besselJ(1, -x) }
        if x.isInfinite { return 0 }
        if x < 12 { return powerSeries(x, order: n, alternating: true, weighted: false) }
        let (p, q) = hankel(Double(n), x)
        let w = x - (Double(n) / 2 + 0.25) * Double.pi
        return (2 / (Double.pi * x)).squareRoot() * (p * cCos(w) - q * cSin(w))
    }

    /// Y_n (n = 0, 1): NaN below 0, -inf at 0.
    static func besselY(_ n: Int, _ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return -.infinity }
        if x.isInfinite { return 0 }
        if x < 12 {
            let log = cLog(x / 2)
            let weighted = powerSeries(x, order: n, alternating: true, weighted: true)
            if n == 0 { return 2 / Double.pi * (log * besselJ(0, x) - weighted / 2) }
            return 2 / Double.pi * log * besselJ(1, x) - 2 / (Double.pi * x) - weighted / Double.pi
        }
        let (p, q) = hankel(Double(n), x)
        let w = x - (Double(n) / 2 + 0.25) * Double.pi
        return (2 / (Double.pi * x)).squareRoot() * (p * cSin(w) + q * cCos(w))
    }

    /// Hankel's P and Q: the even and odd terms of the expansion, alternating in sign.
    private static func hankel(_ nu: Double, _ x: Double) -> (Double, Double) {
        (
            asymptotic(order: nu, x, alternating: true, from: 0, step: 2),
            asymptotic(order: nu, x, alternating: true, from: 1, step: 2)
        )
    }

    /// e^-|x| I_n(|x|) (n = 0, 1), with I_1 odd: the series to 30, the expansion beyond.
    static func besselIScaled(_ n: Int, _ x: Double) -> Double {
        if x.isNaN { return x }
        let a = abs(x)
        let v: Double
        if a.isInfinite {
            v = 0
        } else if a < 30 {
            v = powerSeries(a, order: n, alternating: false, weighted: false) * cExp(-a)
        } else {
            v = asymptotic(order: Double(n), a, alternating: true) / (2 * Double.pi * a).squareRoot()
        }
        return n == 1 && x < 0 ? -v : v
    }

    /// I_n (n = 0, 1).
    static func besselI(_ n: Int, _ x: Double) -> Double {
        if x.isNaN { return x }
        let a = abs(x)
        if a < 30 {
            let v = powerSeries(a, order: n, alternating: false, weighted: false)
            return n == 1 && x < 0 ? -v : v
        }
        if a.isInfinite { return n == 1 && x < 0 ? -.infinity : .infinity }
        // e^a may overflow where the product does not: half the exponent on each side.
        let h = cExp(a / 2)
        let v = besselIScaled(n, a) * h * h
        return n == 1 && x < 0 ? -v : v
    }

    /// e^x K_n(x) (n = 0, 1): NaN below 0, inf at 0; the series to 9, the expansion beyond.
    static func besselKScaled(_ n: Int, _ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return .infinity }
        if x.isInfinite { return 0 }
        if x < 9 { return besselK(n, x) * cExp(x) }
        return (Double.pi / (2 * x)).squareRoot() * asymptotic(order: Double(n), x, alternating: false)
    }

    /// K_n (n = 0, 1).
    static func besselK(_ n: Int, _ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return .infinity }
        if x.isInfinite { return 0 }
        if x >= 9 { return besselKScaled(n, x) * cExp(-x) }
        let log = cLog(x / 2)
        let weighted = powerSeries(x, order: n, alternating: false, weighted: true)
        if n == 0 { return -log * besselI(0, x) + weighted / 2 }
        return 1 / x + log * besselI(1, x) - weighted / 2
    }

    /// sin(x)/x, 1 at 0.
    static func sphericalJ0(_ x: Double) -> Double {
        if x.isInfinite { return 0 }
        if abs(x) < 1e-4 { return 1 - x * x / 6 }
        return cSin(x) / x
    }

    /// Ai(x): the Maclaurin series on [-8, 5.8], the asymptotic forms beyond (decaying to the
    /// right, oscillating to the left). To the right the series loses e^(2ζ) of its precision
    /// to cancellation and the expansion's smallest term is about e^(-2ζ), ζ = (2/3) x^(3/2):
    /// they cross near x = 5.8, at about 1e-8 relative.
    static func airyAi(_ x: Double) -> Double {
        if x.isNaN { return x }
        if x == .infinity { return 0 }
        if x == -.infinity { return 0 }
        if x > 5.8 {
            let z = 2.0 / 3 * x * x.squareRoot()
            if z > 745 { return 0 }
            let s = airySeries(z, alternating: true, from: 0, step: 1)
            return cExp(-z) / (2 * sqrtPi * cPow(x, 0.25)) * s
        }
        if x < -8 {
            let a = -x
            let z = 2.0 / 3 * a * a.squareRoot()
            let p = airySeries(z, alternating: true, from: 0, step: 2)
            let q = airySeries(z, alternating: true, from: 1, step: 2)
            let w = z + Double.pi / 4
            return (cSin(w) * p - cCos(w) * q) / (sqrtPi * cPow(a, 0.25))
        }
        // Ai(x) = c1 f(x) - c2 g(x) with f = Σ 3^k (1/3)_k x^3k/(3k)!, g = Σ 3^k (2/3)_k x^(3k+1)/(3k+1)!.
        let c1 = 0.355_028_053_887_817_239_3, c2 = 0.258_819_403_792_806_798_4
        var f = 1.0, g = x, tf = 1.0, tg = x
        let x3 = x * x * x
        for k in 1..<200 {
            let kd = Double(k)
            tf *= x3 / ((3 * kd - 1) * (3 * kd))
            tg *= x3 / ((3 * kd) * (3 * kd + 1))
            f += tf
            g += tg
            if abs(tf) < 1e-18 * abs(f) && abs(tg) < 1e-18 * max(abs(g), 1e-300) { break }
        }
        return c1 * f - c2 * g
    }

    /// Σ sign^k u_k / z^k over the selected k, u_k = (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k) u_(k-1).
    private static func airySeries(_ z: Double, alternating: Bool, from start: Int, step: Int) -> Double {
        var u = 1.0, sum = 0.0, last = Double.infinity
        for k in 0..<60 {
            if k > 0 {
                let kd = Double(k)
                u *= (6 * kd - 5) * (6 * kd - 3) * (6 * kd - 1) / ((2 * kd - 1) * 216 * kd * z)
            }
            if k >= start && (k - start) % step == 0 {
                let t = alternating && ((k - start) / step) % 2 == 1 ? -u : u
                if abs(t) > last { break }
                sum += t
                last = abs(t)
                if abs(t) < 1e-17 * abs(sum) { break }
            }
        }
        return sum
    }

    // ---- orthogonal polynomials ---------------------------------------------------------------

    /// p_n(x) for the polynomial family `op` by its three-term recurrence, n truncated to an
    /// integer (0 for a negative integer, NaN for a NaN n).
    static func polynomial(_ op: BinaryKernel, _ x: Double, _ nValue: Double) -> Double {
        if nValue.isNaN { return .nan }
        let whole = nValue.rounded(.towardZero)
        if whole < 0 { return 0 }
        let n = whole >= 1e9 ? 1_000_000_000 : Int(whole)
        var t = x
        switch op {
        case .shiftedChebyshevPolynomialT, .shiftedChebyshevPolynomialU, .shiftedChebyshevPolynomialV, .shiftedChebyshevPolynomialW: t = 2 * x - 1
        default: break
        }
        // p_0 and p_1, then p_(k+1) = a_k(t) p_k - b_k p_(k-1).
        let p1: Double
        switch op {
        case .chebyshevPolynomialT, .shiftedChebyshevPolynomialT, .hermitePolynomialHe, .legendrePolynomialP: p1 = t
        case .chebyshevPolynomialU, .shiftedChebyshevPolynomialU, .hermitePolynomialH: p1 = 2 * t
        case .chebyshevPolynomialV, .shiftedChebyshevPolynomialV: p1 = 2 * t - 1
        case .chebyshevPolynomialW, .shiftedChebyshevPolynomialW: p1 = 2 * t + 1
        case .laguerrePolynomialL: p1 = 1 - t
        default: return .nan
        }
        if n == 0 { return 1 }
        if n == 1 { return p1 }
        var previous = 1.0, current = p1
        for k in 1..<n {
            let kd = Double(k)
            let next: Double
            switch op {
            case .hermitePolynomialH: next = 2 * t * current - 2 * kd * previous
            case .hermitePolynomialHe: next = t * current - kd * previous
            case .laguerrePolynomialL: next = ((2 * kd + 1 - t) * current - kd * previous) / (kd + 1)
            case .legendrePolynomialP: next = ((2 * kd + 1) * t * current - kd * previous) / (kd + 1)
            default: next = 2 * t * current - previous
            }
            previous = current
            current = next
            if !current.isFinite { break }
        }
        return current
    }

    // ---- elementary --------------------------------------------------------------------------

    static func log2(_ x: Double) -> Double { cLog2(x) }
    static func log10(_ x: Double) -> Double { cLog10(x) }
    static func exp2(_ x: Double) -> Double { cExp2(x) }
    static func sinh(_ x: Double) -> Double { cSinh(x) }
    static func cosh(_ x: Double) -> Double { cCosh(x) }
    static func asinh(_ x: Double) -> Double { cAsinh(x) }
    static func acosh(_ x: Double) -> Double { cAcosh(x) }
    static func atanh(_ x: Double) -> Double { cAtanh(x) }

    /// sin(πx)/(πx), 1 at 0.
    static func sinc(_ x: Double) -> Double {
        if x == 0 { return 1 }
        if x.isInfinite { return 0 }
        let px = Double.pi * x
        return cSin(px) / px
    }

    /// d sinc/dx = (cos(πx) - sinc(x)) / x, 0 at 0.
    static func sincDerivative(_ x: Double) -> Double {
        if x == 0 { return 0 }
        return (cCos(Double.pi * x) - sinc(x)) / x
    }
}

// libm's double functions under names SpecialMath's members do not shadow.
@inline(__always) private func cErf(_ x: Double) -> Double { erf(x) }
@inline(__always) private func cErfc(_ x: Double) -> Double { erfc(x) }
@inline(__always) private func cExp(_ x: Double) -> Double { exp(x) }
@inline(__always) private func cLog(_ x: Double) -> Double { log(x) }
@inline(__always) private func cLog1p(_ x: Double) -> Double { log1p(x) }
@inline(__always) private func cSin(_ x: Double) -> Double { sin(x) }
@inline(__always) private func cCos(_ x: Double) -> Double { cos(x) }
@inline(__always) private func cTan(_ x: Double) -> Double { tan(x) }
@inline(__always) private func cPow(_ x: Double, _ y: Double) -> Double { pow(x, y) }
@inline(__always) private func cLgamma(_ x: Double) -> Double { lgamma(x) }
@inline(__always) private func cLog2(_ x: Double) -> Double { log2(x) }
@inline(__always) private func cLog10(_ x: Double) -> Double { log10(x) }
@inline(__always) private func cExp2(_ x: Double) -> Double { exp2(x) }
@inline(__always) private func cSinh(_ x: Double) -> Double { sinh(x) }
@inline(__always) private func cCosh(_ x: Double) -> Double { cosh(x) }
@inline(__always) private func cAsinh(_ x: Double) -> Double { asinh(x) }
@inline(__always) private func cAcosh(_ x: Double) -> Double { acosh(x) }
@inline(__always) private func cAtanh(_ x: Double) -> Double { atanh(x) }

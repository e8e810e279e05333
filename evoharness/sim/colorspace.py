"""sRGB ↔ CIELAB (D65) in numpy, for the simulator's recolouring.

The generator must import only numpy/Pillow/pydantic (it also runs in a Triton virtualenv),
so it cannot use scikit-image; these are the standard formulas (IEC 61966-2-1 sRGB transfer
function, CIE 1976 L*a*b* with the D65 white point, as in scikit-image's ``rgb2lab``).
The inspector uses scikit-image itself.
"""

from __future__ import annotations

import numpy as np

_M = np.array(
    [
        [0.412453, 0.357580, 0.180423],
        [0.212671, 0.715160, 0.072169],
        [0.019334, 0.119193, 0.950227],
    ]
)
_M_INV = np.linalg.inv(_M)
_WHITE = np.array([0.95047, 1.0, 1.08883])


def rgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB in 0..1, shape (..., 3) → CIELAB (L 0..100), same shape, float64."""
    rgb = np.asarray(rgb, dtype=np.float64)
    lin = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = lin @ _M.T / _WHITE
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16.0 / 116.0)
    L = 116.0 * f[..., 1] - 16.0
    a = 500.0 * (f[..., 0] - f[..., 1])
    b = 200.0 * (f[..., 1] - f[..., 2])
    return np.stack([L, a, b], axis=-1)


def lab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """CIELAB (D65), shape (..., 3) → sRGB in 0..1 (clipped), float64."""
    lab = np.asarray(lab, dtype=np.float64)
    fy = (lab[..., 0] + 16.0) / 116.0
    fx = fy + lab[..., 1] / 500.0
    fz = fy - lab[..., 2] / 200.0
    f = np.stack([fx, fy, fz], axis=-1)
    xyz = np.where(f > 0.2068966, f**3, (f - 16.0 / 116.0) / 7.787) * _WHITE
    lin = np.clip(xyz @ _M_INV.T, 0.0, None)
    rgb = np.where(lin > 0.0031308, 1.055 * lin ** (1 / 2.4) - 0.055, lin * 12.92)
    return np.clip(rgb, 0.0, 1.0)

"""Maps the top-level folders into one import namespace (ARCHITECTURE §1).

`reference_model/` installs as `bubblescope.reference_model` and `kernels/` as `bubblescope.kernels`,
so nothing collides with other distributions (PyPI already has a `kernels`). setuptools cannot
discover subpackages of a remapped folder from pyproject.toml alone, hence this file.
"""

from setuptools import find_packages, setup

MAPPED_FOLDERS = {"bubblescope.reference_model": "reference_model", "bubblescope.kernels": "kernels"}

packages = find_packages(include=["bubblescope", "bubblescope.*"])
package_dir = {"bubblescope": "bubblescope"}
for namespace, folder in MAPPED_FOLDERS.items():
    package_dir[namespace] = folder
    packages.append(namespace)
    for sub in find_packages(where=folder):
        packages.append(f"{namespace}.{sub}")
        package_dir[f"{namespace}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)

"""Engine repair: reinstall exactly the engine version the integrity check found, from the index
the engine's pip is configured with or from the deployment's wheel directory, then check its
files again. The plan restarts the service and verifies it afterwards, like any serving change.

Stale local patches survive in an engine's install for weeks (one of them corrupted every
prompt of exactly five tokens); a reinstall with --force-reinstall puts back the files the
package's RECORD lists, and --no-deps leaves its dependencies as they are. A running engine
keeps the code it loaded until it restarts, which is why the restart follows.
"""

from __future__ import annotations

from hosts import commands, engine_commands, parsers

from ..engine_repair import differences
from .job import Job
from .outcomes import VerificationFailed
from .shell import longest_command


def reinstall(job: Job) -> None:
    """pip reinstall of exactly `dist==version`, then the integrity check, which must be clean."""
    package = job.change.params["engine_package"]
    dist, version, source = package["dist"], package["version"], package.get("source") or ""
    deployment = job.deployment
    argv = engine_commands.pip_reinstall(deployment.engine_python, dist, version, find_links=source)
    where = f" from {source}" if source else ""
    with job.step(f"reinstall {dist}=={version}{where}") as step:
        job.destructive()
        job.shell.run_or_fail(step, argv, timeout=longest_command())
    with job.step("check the engine's files against its RECORD") as step:
        check = commands.integrity_check(deployment.engine_python, deployment.engine_dist)
        result = job.shell.run(step, check)
        report = parsers.parse_integrity(result.stdout)
        if report.error or not report.clean:
            raise VerificationFailed(
                f"after the reinstall {dist} still differs from its package: "
                f"{report.error or differences(report)}"
            )
        if report.version != version:
            raise VerificationFailed(f"{dist} {report.version} is installed, not {version}")
        step.output = f"{report.dist} {report.version}: all {report.checked} files match"

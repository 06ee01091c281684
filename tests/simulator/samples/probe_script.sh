echo @@cp:begin:gpus; nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,power.draw,power.limit,utilization.gpu,temperature.gpu --format=csv,noheader 2>&1; echo @@cp:end:gpus:"$?"
echo @@cp:begin:compute_apps; nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader 2>&1; echo @@cp:end:compute_apps:"$?"
echo @@cp:begin:processes; ps -e -o pid=,unit= 2>&1; echo @@cp:end:processes:"$?"
echo @@cp:begin:gpu_details; nvidia-smi --query-gpu=index,driver_version,pstate,persistence_mode,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,clocks.sm,clocks.mem,clocks.max.sm,clocks_event_reasons.active,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv,noheader 2>&1; echo @@cp:end:gpu_details:"$?"
echo @@cp:begin:nvidia_smi_version; nvidia-smi --version 2>&1; echo @@cp:end:nvidia_smi_version:"$?"
echo @@cp:begin:gpu_topology; nvidia-smi topo -m 2>&1; echo @@cp:end:gpu_topology:"$?"
echo @@cp:begin:clock; date +%s 2>&1; echo @@cp:end:clock:"$?"
echo @@cp:begin:unit:vllm-kimi-k25.service; systemctl show vllm-kimi-k25.service --no-pager -p Id,LoadState,ActiveState,SubState,Result,MainPID,ExecMainPID,ExecMainCode,ExecMainStatus,ActiveEnterTimestamp,ExecMainStartTimestamp,NRestarts,MemoryCurrent,MemoryPeak,CPUUsageNSec,TasksCurrent,ControlGroup,FragmentPath,DropInPaths,UnitFileState,NeedDaemonReload,EnvironmentFiles 2>&1; echo @@cp:end:unit:vllm-kimi-k25.service:"$?"
echo @@cp:begin:unitfile:vllm-kimi-k25.service; sha256sum -- /etc/systemd/system/vllm-kimi-k25.service 2>&1; echo @@cp:end:unitfile:vllm-kimi-k25.service:"$?"
echo @@cp:begin:unitcat:vllm-kimi-k25.service; systemctl cat --no-pager vllm-kimi-k25.service 2>&1; echo @@cp:end:unitcat:vllm-kimi-k25.service:"$?"
echo @@cp:begin:health:vllm-kimi-k25.service; curl -sS -m 5 -w '\n@@cp:http:%{http_code}\n' http://127.0.0.1:8000/health 2>&1; echo @@cp:end:health:vllm-kimi-k25.service:"$?"
echo @@cp:begin:models:vllm-kimi-k25.service; curl -sS -m 5 -w '\n@@cp:http:%{http_code}\n' http://127.0.0.1:8000/v1/models 2>&1; echo @@cp:end:models:vllm-kimi-k25.service:"$?"
echo @@cp:begin:metrics:vllm-kimi-k25.service; curl -sS -m 5 -w '\n@@cp:http:%{http_code}\n' http://127.0.0.1:8000/metrics 2>&1; echo @@cp:end:metrics:vllm-kimi-k25.service:"$?"
echo @@cp:begin:integrity:vllm-kimi-k25.service; /opt/vllm/.venv/bin/python3 -I -c 'import base64, hashlib, json, os, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps({"error": "distribution not installed", "dist": sys.argv[1]})); sys.exit(3)
base = os.path.normpath(str(dist.locate_file("")))
recorded, modified, missing, checked = set(), [], [], 0
files = list(dist.files or [])
for f in files:
    path = os.path.normpath(str(f.locate()))
    recorded.add(path)
    if f.hash is None:
        continue
    checked += 1
    try:
        with open(path, "rb") as fh:
            digest = hashlib.new(f.hash.mode, fh.read()).digest()
    except FileNotFoundError:
        missing.append(str(f)); continue
    if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != f.hash.value:
        modified.append(str(f))
tops = {str(f).split("/")[0] for f in files if "/" in str(f)}
tops = {t for t in tops if not t.endswith((".dist-info", ".data")) and t != ".."}
added = []
for top in sorted(tops):
    for root, dirs, names in os.walk(os.path.join(base, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            path = os.path.normpath(os.path.join(root, name))
            if path not in recorded and not name.endswith(".pyc"):
                added.append(os.path.relpath(path, base))
print(json.dumps({"dist": dist.metadata["Name"], "version": dist.version,
                  "checked": checked, "modified": sorted(modified),
                  "missing": sorted(missing), "added": sorted(added)}))' vllm 2>&1; echo @@cp:end:integrity:vllm-kimi-k25.service:"$?"

"""A two-node cluster on one machine (ray.cluster_utils.Cluster) whose nodes get separate memory directories.

Runs in a subprocess (the test session keeps its own Ray). Every worker's memory goes through the
memory service actor on the head node: commits from tasks on the second node land in the head's
store, and a later task on the second node reads them from its node-local replica.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray  # a cluster of its own, in the script below

SCRIPT = r'''
import json, os, sys
from pathlib import Path
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray
from ray.cluster_utils import Cluster

tmp = Path(sys.argv[1])
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
current = Path("/tmp/ray/ray_current_cluster")  # Cluster advertises itself machine-wide: take that back
if current.is_file() and current.read_text().strip() == cluster.address:
    current.unlink()
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()

from configs import load_settings
from orchestrator import fanout
from worker.scripted import ScriptedServer

def learn(i):
    return {"match": f"learn {i}$", "turns": [
        {"content": "check", "tool_calls": [{"name": "code_run", "arguments": {"type": "python", "script": f"print({i}*{i})"}}]},
        {"tool_calls": [{"name": "start_long_term_update", "arguments": {}}]},
        {"tool_calls": [{"name": "file_patch", "arguments": {"path": "memory/L2/facts.md", "old_content": "## Environment\n",
                                                             "new_content": f"## Environment\n- square of {i} is {i*i}\n"}}]},
        {"content": f"learned that the square of {i} is {i*i}"}]}  # what the run printed backs the answer

recall = {"match": "recall", "turns": [
    {"content": "reading", "tool_calls": [{"name": "file_read", "arguments": {"path": "memory/L2/facts.md"}}]},
    {"content": "Facts:", "echo_last_tool_result": True}]}

# one process per slot: SPREAD puts them on both nodes; memory.admit auto: the facts land (nothing verifies a fact)
settings = load_settings({"fanout.slots_per_actor": 1, "memory.admit": "auto"})
with ScriptedServer({"tasks": [learn(i) for i in range(4)] + [recall]}) as server:
    model = {"model": f"scripted@{server.base_url}"}
    first = fanout({"tasks": [{"id": f"learn-{i}", "prompt": f"learn {i}"} for i in range(4)], "concurrency": 2,
                    "defaults": model}, address=cluster.address, out=tmp / "runs", display="quiet", settings=settings)
    second = fanout({"tasks": [{"id": f"recall-{i}", "prompt": f"recall {i}"} for i in range(4)], "concurrency": 2,
                     "defaults": model}, address=cluster.address, out=tmp / "runs", display="quiet", settings=settings)
    from orchestrator.memory_service import service_name
    service = ray.get_actor(service_name(settings.memory_root), namespace="ga")
    head_node = next(n["NodeID"] for n in ray.nodes() if n["Resources"].get("node:__internal_head__"))
    out = {
        "head_node": head_node, "service_node": ray.get(service.node.remote()),
        "memory": [first.summary.memory, second.summary.memory],
        "statuses": [first.status, second.status],
        "learn": [{"id": r.task_id, "node": r.actor.node_id, "generation": r.memory_generation} for r in first.results],
        "recall": [{"id": r.task_id, "node": r.actor.node_id, "answer": r.answer} for r in second.results],
        "memory_root": str(settings.memory_root), "replicas": str(settings.home_dir / "memory-replicas"),
    }
print("RESULT " + json.dumps(out))
ray.shutdown()
cluster.shutdown()
'''


def test_two_nodes_with_separate_memory_dirs_share_one_memory_service(tmp_path: Path) -> None:
    script = tmp_path / "multinode.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=400,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    out = json.loads(line[len("RESULT "):])
    # the recall run answers from a file_read, which backs no computed answer: unverified, and answered
    assert out["statuses"] == ["succeeded", "unverified"] and out["memory"] == ["service", "service"]
    assert out["service_node"] == out["head_node"]
    nodes = {r["node"] for r in out["learn"] + out["recall"]}
    assert len(nodes) == 2, "tasks ran on both nodes"
    other = (nodes - {out["head_node"]}).pop()

    from memory_shared import MemoryStore

    store = MemoryStore(Path(out["memory_root"]))
    with store.snapshot() as snap:  # every commit, from either node, is in the head's store
        facts = (Path(snap.path) / "L2" / "facts.md").read_text()
    assert all(f"square of {i} is {i * i}" in facts for i in range(4))
    assert sorted(r["generation"] for r in out["learn"]) == sorted({r["generation"] for r in out["learn"]})
    for r in out["recall"]:  # read from each node's replica of the newest generation
        assert all(f"square of {i} is {i * i}" in r["answer"] for i in range(4)), r
    replicas = Path(out["replicas"])
    per_node = sorted(p.name for p in replicas.iterdir())
    assert len(per_node) == 2 and other[:16] in per_node  # one separate directory per node
    assert (replicas / other[:16] / "generations").is_dir()
    assert not (replicas / other[:16] / "HEAD").exists()  # a replica, not a store of its own

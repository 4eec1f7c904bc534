"""Fluent builders for the objects tests submit: a batch/v1 Job said in one line, with only what the test is about.

``job("a").queue("q").cpu(8).object()`` is a Job in ``default`` asking for 8 cpu on LocalQueue ``q``;
``.yaml()`` gives the same as a manifest for ``kubectl apply`` or a server's API. Each builder call returns the
builder, so a test states the fields it cares about and the rest stay the plain defaults below."""

from __future__ import annotations

from typing import Any

import yaml

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


class JobBuilder:
    """A batch/v1 Job with one container (``c``, image ``busybox``, restartPolicy ``Never``)."""

    def __init__(self, name: str) -> None:
        self._metadata: dict[str, Any] = {"name": name, "namespace": "default"}
        self._labels: dict[str, str] = {}
        self._annotations: dict[str, str] = {}
        self._spec: dict[str, Any] = {}
        self._pod: dict[str, Any] = {"restartPolicy": "Never"}
        self._container: dict[str, Any] = {"name": "c", "image": "busybox"}
        self._requests: dict[str, str] = {}

    def namespace(self, namespace: str | None) -> JobBuilder:
        """The Job's namespace (``None``: none said, the server's default)."""
        if namespace is None:
            self._metadata.pop("namespace", None)
        else:
            self._metadata["namespace"] = namespace
        return self

    def uid(self, uid: str) -> JobBuilder:
        self._metadata["uid"] = uid
        return self

    def queue(self, local_queue: str) -> JobBuilder:
        return self.label(QUEUE_LABEL, local_queue)

    def priority_class(self, name: str | None) -> JobBuilder:
        """Kueue's WorkloadPriorityClass label (``None``: no priority class)."""
        return self if name is None else self.label(PRIORITY_LABEL, name)

    def pod_priority_class(self, name: str | None) -> JobBuilder:
        """The pod template's ``priorityClassName`` (a Kubernetes PriorityClass)."""
        if name is not None:
            self._pod["priorityClassName"] = name
        return self

    def label(self, key: str, value: str) -> JobBuilder:
        self._labels[key] = value
        return self

    def annotate(self, key: str, value: str) -> JobBuilder:
        self._annotations[key] = value
        return self

    def parallelism(self, pods: int) -> JobBuilder:
        self._spec["parallelism"] = pods
        return self

    def completions(self, count: int) -> JobBuilder:
        self._spec["completions"] = count
        return self

    def suspended(self) -> JobBuilder:
        self._spec["suspend"] = True
        return self

    def cpu(self, each: int | str) -> JobBuilder:
        """Each pod's cpu request, as Kubernetes writes a quantity (``8``, ``"500m"``)."""
        self._requests["cpu"] = str(each)
        return self

    def memory(self, each: str) -> JobBuilder:
        self._requests["memory"] = each
        return self

    def image(self, image: str) -> JobBuilder:
        self._container["image"] = image
        return self

    def container_name(self, name: str) -> JobBuilder:
        self._container["name"] = name
        return self

    def command(self, *argv: str) -> JobBuilder:
        self._container["command"] = list(argv)
        return self

    def tolerate(self, toleration: dict[str, Any]) -> JobBuilder:
        self._pod.setdefault("tolerations", []).append(dict(toleration))
        return self

    def restart_policy(self, policy: str | None) -> JobBuilder:
        """The pod template's restartPolicy (``None``: not said)."""
        if policy is None:
            self._pod.pop("restartPolicy", None)
        else:
            self._pod["restartPolicy"] = policy
        return self

    def object(self) -> dict[str, Any]:
        """The Job as a fresh dict (each call a new one: a test may change it)."""
        metadata = dict(self._metadata)
        if self._labels:
            metadata["labels"] = dict(self._labels)
        if self._annotations:
            metadata["annotations"] = dict(self._annotations)
        container = dict(self._container)
        if "command" in container:
            container["command"] = list(container["command"])
        if self._requests:
            container["resources"] = {"requests": dict(self._requests)}
        pod = {**self._pod, "containers": [container]}
        if "tolerations" in pod:
            pod["tolerations"] = [dict(t) for t in pod["tolerations"]]
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                "spec": {**self._spec, "template": {"spec": pod}}}

    def yaml(self) -> str:
        """The Job as a YAML manifest."""
        return yaml.safe_dump(self.object(), sort_keys=False)


def job(name: str, *, queue: str | None = None, cpu: int | str | None = None, pods: int | None = None) -> JobBuilder:
    """A batch/v1 Job named ``name`` in ``default``, to be said more of fluently; the three things most tests say
    (its LocalQueue, each pod's cpu, its parallelism) may be said here."""
    made = JobBuilder(name)
    if queue is not None:
        made.queue(queue)
    if cpu is not None:
        made.cpu(cpu)
    if pods is not None:
        made.parallelism(pods)
    return made

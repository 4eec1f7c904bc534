"""The guide's linear regression with Ray Train checkpoints: a run that is stopped (evicted, requeued) resumes
from its latest checkpoint instead of starting over.

flexq gives every RayJob a persistent directory in FLEXQ_CHECKPOINT_DIR (kept across the job's runs), used as
Ray Train's storage_path. Within a run, Ray Train hands a restarted worker group its latest checkpoint
(ray.train.get_checkpoint()); a new run (after a requeue) finds the previous run's latest checkpoint itself.
"""

import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import ray.train
from ray.train import Checkpoint, RunConfig, ScalingConfig
from ray.train.v2.jax import JaxTrainer

EPOCHS = 60


STORAGE = os.environ.get("FLEXQ_CHECKPOINT_DIR", os.path.join(tempfile.gettempdir(), "flexq-checkpoints"))
NAME = "linear-regression"


def latest_state():
    """The state file of this run's latest checkpoint, or of the latest one a previous run of the job left."""
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        return os.path.join(checkpoint.path, "state.npz")
    run_dir = os.path.join(STORAGE, NAME)
    found = sorted(d for d in os.listdir(run_dir) if d.startswith("checkpoint_")) if os.path.isdir(run_dir) else []
    found = [os.path.join(run_dir, d, "state.npz") for d in found]
    found = [f for f in found if os.path.exists(f)]
    return found[-1] if found else None


def train_func():
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (1000, 10))
    w_true = jax.random.normal(key, (10, 1))
    y = jnp.dot(x, w_true)
    w = jnp.zeros((10, 1))
    start = 0
    state_file = latest_state()
    if state_file:
        state = np.load(state_file)
        w, start = jnp.asarray(state["w"]), int(state["epoch"]) + 1
        print(f"Resuming from checkpoint at epoch {start}")

    @jax.jit
    def update(w, x, y):
        loss = jnp.mean((jnp.dot(x, w) - y) ** 2)
        grad = jax.grad(lambda w: jnp.mean((jnp.dot(x, w) - y) ** 2))(w)
        return w - 0.1 * grad, loss

    rank = ray.train.get_context().get_world_rank()
    for epoch in range(start, EPOCHS):
        w, loss = update(w, x, y)
        if epoch % 5 == 0:
            with tempfile.TemporaryDirectory() as directory:
                if rank == 0:
                    np.savez(os.path.join(directory, "state.npz"), w=np.asarray(w), epoch=epoch)
                ray.train.report({"loss": float(loss), "epoch": epoch},
                                 checkpoint=Checkpoint.from_directory(directory) if rank == 0 else None)
            print(f"Epoch {epoch}: Loss {loss:.4f}")
        time.sleep(0.5)  # slow enough to be interrupted
    print("Training Complete!")


def main():
    trainer = JaxTrainer(
        train_loop_per_worker=train_func,
        scaling_config=ScalingConfig(num_workers=4, resources_per_worker={"TPU": 4}, use_tpu=True,
                                     topology="4x4", accelerator_type="TPU-V6E"),
        run_config=RunConfig(name=NAME, storage_path=STORAGE),
    )
    result = trainer.fit()
    print(f"Run Result: {result.metrics}")


if __name__ == "__main__":
    main()

"""Virtual time: scenarios, the event kernel, the runner that replays them through the scheduler."""

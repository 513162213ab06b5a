"""The one-shot CLI face: each headless action (`actions`) and how its results are printed (`output`)."""

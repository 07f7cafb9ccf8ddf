"""smelt.data: datasets, the bundled digits data set and the data loader.

    digits = smelt.data.load_digits()                   # inputs (1797, 64), targets (1797,)
    train, test = smelt.data.train_test_split(digits, 0.8, seed=0)
    for inputs, targets in smelt.data.DataLoader(train, batch_size=64, shuffle=True, seed=1):
        ...
"""
from ._smelt.data import (DataLoader, Dataset, Subset, TensorDataset, default_data_dir,  # noqa: F401
                          load_digits, random_split, train_test_split)

-- made by tests/oracle/make_state_dict_fixtures.py (PyTorch 1.13.0a0)
return {keys = {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"},
        x = {{-1.5051417350769043, 0.25498273968696594, 1.8042484521865845}, {-0.450237512588501, -0.48303207755088806, 0.6577075719833374}},
        y = {{0.07481622695922852, 0.26798030734062195}, {-0.07072878628969193, 0.06655658036470413}}}

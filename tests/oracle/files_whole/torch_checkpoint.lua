-- made by make_files_whole_fixtures.py: the values in torch_checkpoint.safetensors (row-major)
return {
  ["weight"] = {shape = {2, 3}, values = {-0.004322517663240433, 0.3097158372402191, -0.4751853346824646, -0.4248946011066437, -0.2223689705133438, 0.15482072532176971}},
  ["bias"] = {shape = {2}, values = {-0.011439144611358643, 0.45777493715286255}},
}

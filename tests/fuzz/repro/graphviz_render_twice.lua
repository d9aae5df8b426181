-- torch.graphviz to .svg twice in one process: Graphviz 2.42's pango plugin reads freed memory
-- (heap-use-after-free in strcmp from libgvplugin_pango, under textspan_size / make_label /
-- dot_layout), and the fontconfig/libgvc allocations of the render are reported as leaks at exit.
-- A known class of fault in third-party code (Graphviz).
local path = os.tmpname()
local x = torch.randn(2, 2, {requires_grad = true})
local y = (x * 2):sum()
for i = 1, 3 do torch.graphviz(y, path .. ".svg") end
os.remove(path .. ".svg"); os.remove(path)
print("no crash")

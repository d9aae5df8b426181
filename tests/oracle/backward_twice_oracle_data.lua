-- made by tests/oracle/make_backward_twice_oracle.py with PyTorch 2.15.0+cu132
return {
  saves_nothing = {{raised = false, grad = {1.0, 1.0, 1.0}}, {raised = false, grad = {2.0, 2.0, 2.0}}},
  saves_inputs = {{raised = false, grad = {1.0, -2.0, 4.0}}, {raised = true, grad = {1.0, -2.0, 4.0}}},
  retained = {{raised = false, grad = {1.0, -2.0, 4.0}}, {raised = false, grad = {2.0, -4.0, 8.0}}, {raised = true, grad = {2.0, -4.0, 8.0}}},
  shared_subgraph = {{raised = false, grad = {0.7864477329659274, 0.41997434161402614, 0.07065082485316443}}, {raised = true, grad = {0.7864477329659274, 0.41997434161402614, 0.07065082485316443}}},
  create_graph = {{raised = false, grad = {1.0, -2.0, 4.0}}, {raised = false, grad = {2.0, -4.0, 8.0}}},
  custom_function = {{raised = false, grad = {1.0, -2.0, 4.0}}, {raised = true, grad = {1.0, -2.0, 4.0}}},
}

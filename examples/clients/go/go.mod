module zkelect.example/client

go 1.19
